"""The Content Security Policy header: strict on every page, no inline or foreign script
(the browser half is ``tests/browser/test_csp.py``)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


# --- Content Security Policy ---------------------------------------------------------------------


def _directives(header: str) -> dict[str, list[str]]:
    parts = (part.strip().split() for part in header.split(";") if part.strip())
    return {part[0]: part[1:] for part in parts}


def test_pages_carry_a_strict_policy(personas):
    client = Client()
    client.force_login(personas.org_admin)
    policy = _directives(client.get("/dashboards/health/")["Content-Security-Policy"])
    assert policy["default-src"] == ["'self'"]
    # Our files, and a nonce only on a response whose template used it (none does today).
    assert policy["script-src"][0] == "'self'"
    assert all(source.startswith("'nonce-") for source in policy["script-src"][1:])
    assert "'unsafe-inline'" not in policy["script-src"]
    assert not any("eval" in source for sources in policy.values() for source in sources)
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    # Nothing is allowed from another origin (no CDN): only 'self', data: images, keywords.
    for sources in policy.values():
        for source in sources:
            assert source.startswith("'") or source == "data:", source


@pytest.mark.parametrize(
    "path", ["/", "/dashboards/delivery/", "/dashboards/health/", "/tree/", "/simulator/"]
)
def test_pages_have_no_inline_script_and_no_foreign_script(personas, path):
    client = Client()
    client.force_login(personas.org_admin)
    response = client.get(path, follow=True)
    assert response.status_code == 200
    html = response.content.decode()
    for tag in re.findall(r"<script\b[^>]*>", html):
        if 'type="application/json"' in tag:  # json_script data: never executed
            continue
        src = re.search(r'src="([^"]+)"', tag)
        assert src, f"inline script on {path}: {tag}"
        assert src.group(1).startswith("/static/"), f"script from elsewhere on {path}: {tag}"
    assert not re.search(r"\son[a-z]+=", html), f"inline event handler on {path}"


def test_swagger_ui_has_no_inline_script(db):
    html = Client().get("/api/docs/").content.decode()
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag, tag
    script = Client().get("/api/docs/?script=")
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
