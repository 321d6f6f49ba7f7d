"""Web security: deploy checks, CSRF on every form, secure cookies and HSTS, the Content
Security Policy header, sign-in throttling, and safe trace uploads.

Production settings are read in a subprocess (``governance/settings/`` reads the environment
once, at import): ``DEBUG=false`` with a real secret key and host names. The browser half of
the CSP (pages with Plotly draw under it, no violation) is ``tests/browser/test_csp.py``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
import secrets
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from openpyxl import load_workbook

from scheduler.models import SimulationJob, SimulationJobState
from scheduler.services.simulations import (
    MAX_UPLOAD_BYTES,
    simulation_job_run,
    trace_upload_read,
)
from tests.governance import test_permission_matrix as matrix
from tests.governance.test_reports_selector import october_fixture  # noqa: F401

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
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


# --- manage.py check --deploy ----------------------------------------------------------------


def test_check_deploy_is_clean_under_production_settings():
    done = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_check_deploy_would_catch_a_missing_hsts():
    """Not vacuous: the same check fails when production turns HSTS off."""
    done = manage(
        "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION, SECURE_HSTS_SECONDS="0"
    )
    assert done.returncode != 0
    assert "security.W004" in done.stdout + done.stderr


@pytest.mark.parametrize("key", ["", "dev-only-insecure-secret-key-do-not-use-in-production"])
def test_production_refuses_an_empty_or_development_secret_key(key):
    # An empty key used to pass: the server started and failed on its first session.
    done = manage("check", **{**PRODUCTION, "SECRET_KEY": key})
    assert done.returncode != 0
    assert "SECRET_KEY is the development default while DEBUG=false" in done.stderr


def test_a_server_runs_no_simulated_nodes_unless_asked():
    # The demo's simulated executor completes the workloads of its clusters by itself: on by
    # default only on a developer's machine (DEBUG=true, as ``make run`` sets it).
    values = production_settings(("SIMULATED_EXECUTOR_ENABLED", "DEMO_REPLAY_ENABLED"))
    assert values == {"SIMULATED_EXECUTOR_ENABLED": False, "DEMO_REPLAY_ENABLED": False}


# --- Secure cookies and HSTS behind DEBUG=false -----------------------------------------------


@pytest.fixture(scope="module")
def production_values() -> dict:
    """Production's security settings, computed once (a subprocess)."""
    return production_settings()


@pytest.fixture
def production(settings, production_values):
    """The test settings overridden with production's security settings."""
    values = production_values
    assert values["DEBUG"] is False
    for name, value in values.items():
        if name != "DEBUG":  # the test runner keeps DEBUG off already
            setattr(settings, name, value)
    return values


def test_production_settings_are_secure(production):
    assert production["SECURE_SSL_REDIRECT"] is True
    assert production["SESSION_COOKIE_SECURE"] is True
    assert production["CSRF_COOKIE_SECURE"] is True
    assert production["SESSION_COOKIE_HTTPONLY"] is True
    assert production["SECURE_HSTS_SECONDS"] >= 31536000
    assert production["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True


def test_plain_http_is_redirected_to_https(production, personas):
    response = Client().get("/accounts/login/", HTTP_HOST="gpu.example.org")
    assert response.status_code == 301
    assert response["Location"] == "https://gpu.example.org/accounts/login/"


def test_https_responses_carry_hsts_and_secure_cookies(production, personas):
    client = Client(HTTP_HOST="gpu.example.org")
    page = client.get("/accounts/login/", secure=True)
    assert page.status_code == 200
    hsts = page["Strict-Transport-Security"]
    assert re.fullmatch(r"max-age=31536000; includeSubDomains; preload", hsts), hsts
    assert page["X-Content-Type-Options"] == "nosniff"
    assert page["X-Frame-Options"] == "DENY"
    assert page["Referrer-Policy"] == "same-origin"
    csrf_cookie = page.cookies["csrftoken"]
    assert csrf_cookie["secure"] is True

    signed_in = client.post(
        "/accounts/login/",
        {"login": "pi", "password": personas.password, "csrfmiddlewaretoken": csrf_cookie.value},
        secure=True,
        HTTP_REFERER="https://gpu.example.org/accounts/login/",
    )
    assert signed_in.status_code == 302, signed_in.content[:500]
    session = signed_in.cookies["sessionid"]
    assert session["secure"] is True
    assert session["httponly"] is True
    assert session["samesite"] == "Lax"


# --- CSRF on every form --------------------------------------------------------------------------

# Pages that take a POST without a CSRF token, and why that is safe.
CSRF_EXEMPT = {
    # RFC 8058 one-click unsubscribe: mail clients POST it without any session. The signed
    # token in the URL is the credential, and all it can do is stop one kind of e-mail.
    "notifications-unsubscribe",
}
PAGE_ROUTES = sorted(
    name for name in matrix.ROUTES if not name.startswith("api:") and name not in CSRF_EXEMPT
)


# The permission matrix's world: its own and cross-tenant objects, and each route's payload.
fast_password_hasher = matrix.fast_password_hasher
world = matrix.world


@pytest.mark.parametrize("name", PAGE_ROUTES)
def test_every_page_refuses_a_post_without_the_csrf_token(name, world):
    decision = matrix.DECISIONS[name]
    url = reverse(name, kwargs=decision.url(world) if decision.url else None)
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.p.org_admin)  # the widest role: would be allowed most writes
    body = decision.payload(world, "org_admin") if decision.payload else {}
    response = client.post(url, body)
    assert response.status_code == 403, f"POST {url} without a CSRF token: {response.status_code}"
    assert b"CSRF" in response.content


def test_the_same_post_with_the_token_goes_through(world):
    """Not vacuous: with the form's token the approval the test above refused is made."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.p.program_manager)
    detail = client.get(reverse("approval-detail", kwargs={"pk": world.request_a.pk}))
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', detail.content).group(1)
    response = client.post(
        reverse("approval-approve", kwargs={"pk": world.request_a.pk}),
        {"approve-comment": "Fine.", "csrfmiddlewaretoken": token.decode()},
    )
    assert response.status_code == 302


def test_sign_in_refuses_a_post_without_the_csrf_token(personas):
    response = Client(enforce_csrf_checks=True).post(
        "/accounts/login/", {"login": "pi", "password": personas.password}
    )
    assert response.status_code == 403


def test_the_api_with_a_session_needs_the_csrf_token_and_with_a_token_does_not(personas):
    body = {"project": personas.project_a1.pk, "gpus": 1, "launch_spec": {"command": ["true"]}}
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(personas.researcher)
    refused = browser.post("/api/workloads/", body, content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]

    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=personas.researcher)
    script = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {token.key}")
    assert script.post("/api/workloads/", body, content_type="application/json").status_code == 201


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


# --- Sign-in throttling ----------------------------------------------------------------------------


@pytest.fixture
def empty_cache():
    """allauth counts failed sign-ins in the cache: start and leave it empty."""
    cache.clear()
    yield
    cache.clear()


def test_repeated_failed_sign_ins_are_throttled(personas, empty_cache):
    client = Client()
    for attempt in range(5):
        failed = client.post("/accounts/login/", {"login": "pi", "password": f"wrong-{attempt}"})
        assert failed.status_code == 200
        assert b"Too many failed login attempts" not in failed.content
    # The sixth attempt is refused, even with the right password, and nobody is signed in.
    throttled = client.post("/accounts/login/", {"login": "pi", "password": personas.password})
    assert b"Too many failed login attempts. Try again later." in throttled.content
    assert "_auth_user_id" not in client.session
    # Another account from elsewhere is not affected.
    other = Client(REMOTE_ADDR="10.0.0.9").post(
        "/accounts/login/", {"login": "researcher", "password": personas.password}
    )
    assert other.status_code == 302


# --- Uploaded traces --------------------------------------------------------------------------------

HEADER = "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"


def simulate(user, data: bytes, name: str = "trace.csv"):
    client = Client()
    client.force_login(user)
    return client.post(
        "/simulator/run/",
        {
            "trace_source": "upload",
            "trace_file": SimpleUploadedFile(name, data, content_type="text/csv"),
            "gpus": "8",
            "gpus_per_node": "8",
            "budgets": "proportional",
            "policies": ["fifo"],
        },
    )


def refusal(response) -> str:
    assert response.status_code == 400, response.status_code
    assert SimulationJob.objects.count() == 0
    return response.content.decode()


def test_an_oversized_upload_is_refused_naming_the_limit(personas):
    data = (HEADER + "a,2026-01-05T00:00:00,60,1,p,,\n" * 80_000).encode()
    assert len(data) > MAX_UPLOAD_BYTES
    assert f"the limit is {MAX_UPLOAD_BYTES:,} bytes" in refusal(simulate(personas.org_admin, data))


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """200 MB of zeros gzip to about 200 KB: inside the upload limit, 100 x past it unzipped."""
    bomb = gzip.compress(b"\0" * 200_000_000, compresslevel=9)
    assert len(bomb) < MAX_UPLOAD_BYTES // 5
    return bomb


def test_a_gzip_bomb_is_refused(personas, gzip_bomb):
    html = refusal(simulate(personas.org_admin, gzip_bomb, "trace.csv.gz"))
    assert f"Unzipped, the file is over {MAX_UPLOAD_BYTES:,} bytes" in html


def test_a_gzip_bomb_is_never_inflated_whole(gzip_bomb):
    # It used to be: gzip.decompress() built all 200 MB before the size was checked.
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError):
            trace_upload_read(data=gzip_bomb, name="bomb.csv.gz")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * MAX_UPLOAD_BYTES, f"peak {peak:,} bytes while reading the upload"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (os.urandom(4096), "not a UTF-8 text file"),
        (b"\x1f\x8b" + os.urandom(4096), "not a readable gzip file"),
        (b"\0" * 1000, "header lacks column"),
        (b"", "The submitted file is empty"),
        ((HEADER + "a,2026-01-05T00:00:00,60,1," + "p" * 200_000 + ",,\n").encode(), "line 2"),
        ((HEADER + '"unterminated,2026\n' * 3).encode(), "trace.csv"),
    ],
    ids=["binary", "broken-gzip", "nul-bytes", "empty", "huge-field", "bad-quoting"],
)
def test_garbage_is_refused_with_a_reason(personas, data, reason):
    assert reason in refusal(simulate(personas.org_admin, data))


def test_formula_and_markup_in_a_trace_stay_inert_text(personas):
    # CSV injection: a project named like a spreadsheet formula, and one with markup.
    formula = '=HYPERLINK("http://evil.example","x")'
    markup = "<script>alert(1)</script>"
    text = (
        HEADER
        + f'a,2026-01-05T00:00:00,3600,8,"{formula.replace(chr(34), chr(34) * 2)}",,\n'
        + f"b,2026-01-05T00:10:00,3600,4,{markup},,\n"
    )
    response = simulate(personas.org_admin, text.encode())
    assert response.status_code == 302
    job = SimulationJob.objects.get()
    done = simulation_job_run(job_id=job.pk)
    assert done.state == SimulationJobState.DONE
    # In the charts the name is plain text: its markup escaped, so Plotly draws the characters.
    shown_markup = markup.replace("<", "&lt;").replace(">", "&gt;")
    assert done.result["figures"][0]["delivery"]["data"][0]["x"] == [shown_markup, formula]
    client = Client()
    client.force_login(personas.org_admin)
    page = client.get(reverse("scheduler:simulation-detail", kwargs={"pk": job.pk}))
    html = page.content.decode()
    assert markup not in html  # escaped wherever it is shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html or "\\u003Cscript" in html


# --- Exports: names are never formulas (CSV injection) -------------------------------------------

FORMULA = '=HYPERLINK("http://evil.example","Detection")'


def _export(october, fmt: str) -> bytes:
    """Finance's October report (tests/governance/test_reports_selector.py), Detection renamed."""
    october.project_a1.name = FORMULA
    october.project_a1.save(update_fields=["name"])
    client = Client()
    client.force_login(october.finance)
    response = client.get(f"/reports/usage.{fmt}", {"month": "2026-10", "level": "project"})
    assert response.status_code == 200
    return response.content


def test_a_formula_in_a_name_is_inert_in_the_csv_export(october):
    text = _export(october, "csv").decode("utf-8-sig")
    cells = [cell for row in csv.reader(io.StringIO(text)) for cell in row]
    assert "'" + FORMULA in cells  # shown as text by every spreadsheet
    assert FORMULA not in cells
    assert "CC-DET" in cells  # other names are untouched


def test_a_formula_in_a_name_is_text_in_the_xlsx_export(october):
    sheet = load_workbook(io.BytesIO(_export(october, "xlsx")))["Usage"]
    cells = [cell for row in sheet.iter_rows() for cell in row if cell.value == FORMULA]
    assert cells, "Detection's row is in the export"
    assert all(cell.data_type == "s" for cell in cells)  # a string, not a formula ("f")


def test_an_upload_past_the_request_limit_is_refused_before_it_is_read(personas, settings):
    # It used to be received whole (spooled to disk) and only then refused by the simulator.
    client = Client()
    client.force_login(personas.org_admin)
    body = b"x" * (settings.MAX_REQUEST_BYTES + 1)
    response = client.generic(
        "POST", "/simulator/run/", body, content_type="multipart/form-data; boundary=xyz"
    )
    assert response.status_code == 413
    assert f"the limit is {settings.MAX_REQUEST_BYTES:,} bytes" in response.content.decode()
    api = client.generic("POST", "/api/workloads/", body, content_type="application/json")
    assert api.status_code == 413
    assert api.json()["detail"].startswith("Request body is too large")
    assert SimulationJob.objects.count() == 0


def test_a_trace_at_the_upload_limit_is_still_accepted_by_the_request_limit(settings):
    assert settings.MAX_REQUEST_BYTES > MAX_UPLOAD_BYTES + 64 * 1024  # room for the form fields
