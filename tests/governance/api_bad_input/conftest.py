"""The bad-input tests' fixtures: cheap password hashing, "the database is unchanged", and a
submitted request to decide."""

from __future__ import annotations

import pytest

from governance.models import ApprovalRequest
from tests.governance.api_bad_input.helpers import client_for, request_by_pi, snapshot


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """Hash the personas' passwords cheaply (autouse, so it runs before ``personas``)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def unchanged(personas):
    """Assert, after the test body, that the database is exactly as it was before."""
    before = snapshot()
    yield
    assert snapshot() == before


@pytest.fixture
def submitted(personas):
    """A request by the PI, submitted, waiting for the program manager."""
    response = client_for(personas.pi).post(
        "/api/approval-requests/", request_by_pi(personas), format="json"
    )
    assert response.status_code == 201, response.content
    return ApprovalRequest.objects.get(pk=response.json()["id"])
