"""CSRF on every form: every page refuses a POST without the token; the API needs it with a
session and not with a token."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.governance import test_permission_matrix as matrix

pytestmark = pytest.mark.django_db


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
