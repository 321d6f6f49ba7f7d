"""Production settings: ``check --deploy`` is clean, the secret key is required, and behind
``DEBUG=false`` plain HTTP is redirected and responses carry HSTS and secure cookies."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.governance.web_security.production import (
    PRODUCTION,
    manage,
    production_settings,
)

pytestmark = pytest.mark.django_db


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
