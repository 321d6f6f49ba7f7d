"""Password guessing on ``/api/token/`` is locked out per account and per client address, and
invalid bearer tokens (users' and agents') per address, in the shared cache (Redis here, as on
a server with several processes)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from governance.services.lockout import LIMITS
from scheduler.models import Node
from scheduler.services.executor_reports import node_agent_create
from tests.factories import TEST_PASSWORD as PASSWORD
from tests.personas import build_personas

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared_cache(settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/3",
        }
    }
    cache.clear()
    yield
    cache.clear()


def token(username, password, address="10.0.0.1"):
    return APIClient(REMOTE_ADDR=address).post(
        "/api/token/", {"username": username, "password": password}, format="json"
    )


def test_after_five_wrong_passwords_even_the_right_one_waits(shared_cache):
    build_personas()
    for _ in range(LIMITS["account"]):
        assert token("researcher", "guess").status_code == 400
    locked = token("researcher", PASSWORD)
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= 301
    assert "Too many failed sign-ins" in locked.json()["detail"]
    # From another address too: the account is what was guessed at.
    assert token("researcher", PASSWORD, address="10.0.0.2").status_code == 429
    # Another account from another address is not affected.
    assert token("pi", PASSWORD, address="10.0.0.2").status_code == 200


def test_many_accounts_tried_from_one_address_lock_that_address(shared_cache):
    build_personas()
    names = ["org_admin", "program_manager", "pi", "researcher", "finance", "outsider"]
    for i in range(LIMITS["address"]):
        assert token(names[i % len(names)] + ("" if i < 6 else "x"), "guess").status_code == 400
    assert token("pi", PASSWORD).status_code == 429
    assert token("pi", PASSWORD, address="10.0.0.9").status_code == 200


def test_a_success_clears_the_accounts_failures(shared_cache):
    build_personas()
    for _ in range(LIMITS["account"] - 1):
        token("finance", "guess")
    assert token("finance", PASSWORD).status_code == 200
    for _ in range(LIMITS["account"] - 1):
        assert token("finance", "guess", address="10.0.0.3").status_code == 400
    assert token("finance", PASSWORD, address="10.0.0.3").status_code == 200


# --- bearer tokens: users' API tokens and node agents' tokens, counted per address ----------


def test_invalid_user_tokens_lock_the_address_not_the_sessions(shared_cache):
    p = build_personas()
    valid = Token.objects.create(user=p.researcher).key
    guesser = APIClient(REMOTE_ADDR="10.0.1.1")
    for i in range(LIMITS["secret-address"]):
        guesser.credentials(HTTP_AUTHORIZATION=f"Token guess{i}")
        assert guesser.get("/api/projects/").status_code in (401, 403)
    guesser.credentials(HTTP_AUTHORIZATION=f"Token {valid}")
    locked = guesser.get("/api/projects/")
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= 301
    assert "Too many invalid tokens" in locked.json()["detail"]
    # The valid token from another address, and a signed-in browser at the same address, pass.
    elsewhere = APIClient(REMOTE_ADDR="10.0.1.2")
    elsewhere.credentials(HTTP_AUTHORIZATION=f"Token {valid}")
    assert elsewhere.get("/api/projects/").status_code == 200
    browser = APIClient(REMOTE_ADDR="10.0.1.1")
    browser.force_login(p.researcher)
    assert browser.get("/api/projects/").status_code == 200


def test_invalid_agent_tokens_lock_the_address(shared_cache):
    p = build_personas()
    _, valid = node_agent_create(cluster=p.cluster, name="gpu-lockout-1")
    body = {"node": "gpu-lockout-1", "gpus": 8}
    guesser = APIClient(REMOTE_ADDR="10.0.2.1")
    for i in range(LIMITS["secret-address"]):
        guesser.credentials(HTTP_AUTHORIZATION=f"Token guess{i}")
        assert guesser.post("/api/agent/register/", body, format="json").status_code == 401
    guesser.credentials(HTTP_AUTHORIZATION=f"Token {valid}")
    locked = guesser.post("/api/agent/register/", body, format="json")
    assert locked.status_code == 429
    assert int(locked["Retry-After"]) > 0
    assert not Node.objects.filter(name="gpu-lockout-1").exists()
    agent = APIClient(REMOTE_ADDR="10.0.2.2")
    agent.credentials(HTTP_AUTHORIZATION=f"Token {valid}")
    assert agent.post("/api/agent/register/", body, format="json").status_code in (200, 201)
