"""A database that cannot be reached is a 503 with Retry-After, not a 500.

The database really is unreachable here: the test points Django's connection at a closed
local port for the request, then back. Found by `make faults`: while PostgreSQL restarted,
requests failed with 500, which scripts and agents read as "broken", not "try again".
"""

from __future__ import annotations

import socket

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db(transaction=True)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket is


def _while_database_is_away(request):
    """Send ``request()`` with the default connection pointed at a closed port."""
    saved = connection.settings_dict["PORT"], connection.settings_dict["HOST"]
    connection.close()
    connection.settings_dict["HOST"], connection.settings_dict["PORT"] = "127.0.0.1", _closed_port()
    try:
        return request()
    finally:
        connection.close()
        connection.settings_dict["PORT"], connection.settings_dict["HOST"] = saved


@pytest.fixture
def token_client():
    user = get_user_model().objects.create_user("script", password="x-unused-x")
    token = Token.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}")


def test_api_answers_503_with_retry_after_while_the_database_is_away(token_client):
    response = _while_database_is_away(lambda: token_client.get("/api/workloads/"))

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "database is unavailable" in response.json()["detail"]
    # Back: the same request is answered as usual.
    assert token_client.get("/api/workloads/").status_code == 200


def test_page_answers_503_while_the_database_is_away(token_client):
    client = Client()
    user = get_user_model().objects.create_user("reader", password="x-unused-x")
    client.force_login(user)

    response = _while_database_is_away(lambda: client.get("/workloads/"))

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert client.get("/workloads/").status_code == 200


def test_other_errors_are_not_turned_into_503():
    from django.http import HttpRequest

    from governance.middleware import DatabaseUnavailableMiddleware

    middleware = DatabaseUnavailableMiddleware(lambda request: None)
    request = HttpRequest()
    request.path = "/api/workloads/"
    assert middleware.process_exception(request, ValueError("a bug")) is None
