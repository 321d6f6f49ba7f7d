"""``PUT /api/clusters/{id}/idle-policy/``: a body with several bad fields is answered with
every one of them at once, by the same bounds the service enforces."""

from __future__ import annotations

import pytest

from scheduler.models import IdlePolicy
from scheduler.selectors.utilization import FOR_MINUTES, PERCENT_MAX
from tests.personas import build_personas
from tests.scheduler.agent_api import user_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin():
    personas = build_personas()
    return personas, user_client(personas.org_admin)


def put(personas, client, body):
    return client.put(f"/api/clusters/{personas.cluster.pk}/idle-policy/", body, format="json")


@pytest.mark.parametrize(
    "body",
    [
        {"enabled": "maybe", "busy_below_percent": "0", "for_minutes": 4},
        {"enabled": "maybe", "busy_below_percent": "100.01", "for_minutes": 1441},
        {"enabled": None, "busy_below_percent": "-3", "for_minutes": 0},
    ],
)
def test_every_bad_field_is_named_at_once(admin, body):
    personas, client = admin
    response = put(personas, client, body)
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"enabled", "busy_below_percent", "for_minutes"}
    assert not IdlePolicy.objects.exists()


def test_the_bounds_themselves_are_accepted(admin):
    personas, client = admin
    for percent, minutes in [("0.01", FOR_MINUTES[0]), (str(PERCENT_MAX), FOR_MINUTES[1])]:
        body = {"enabled": True, "busy_below_percent": percent, "for_minutes": minutes}
        response = put(personas, client, body)
        assert response.status_code == 200, response.json()
        assert response.json()["for_minutes"] == minutes
