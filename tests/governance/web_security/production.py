"""The settings production computes (``DEBUG=false``), read in a subprocess: ``governance/settings/``
reads the environment once, at import."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "gpu.example.org",
    "SITE_URL": "https://gpu.example.org",
}
SECURITY_SETTINGS = [
    "DEBUG",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SESSION_COOKIE_HTTPONLY",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_CONTENT_TYPE_NOSNIFF",
    "SECURE_REFERRER_POLICY",
    "X_FRAME_OPTIONS",
    "ALLOWED_HOSTS",
]


def subprocess_env(**env: str) -> dict[str, str]:
    """This process's environment plus ``env``, without what only the test run sets.

    The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE for Playwright (``check --deploy`` rightly
    reports it as async.E001); a deployment does not have it.
    """
    inherited = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return {**inherited, **env}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``manage.py`` in a subprocess with the test environment plus ``env``."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def production_settings(names: tuple[str, ...] | None = None) -> dict:
    """Settings ``names`` (the security settings by default) as production computes them
    (DEBUG=false)."""
    names = tuple(names or SECURITY_SETTINGS)
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        f"print(json.dumps({{k: getattr(s, k) for k in {names!r}}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=subprocess_env(**PRODUCTION, DJANGO_SETTINGS_MODULE="governance.settings"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
