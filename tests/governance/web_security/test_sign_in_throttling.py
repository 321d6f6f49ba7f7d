"""Sign-in throttling: repeated failed sign-ins for one account are refused for a while."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


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
