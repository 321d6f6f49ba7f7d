"""Owed vs delivered: the idle column per team.

The day and its figures: ``world.py``.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.governance.utilization_pages.world import (
    DELIVERY,
    client_for,
)

pytestmark = pytest.mark.django_db


def idle_cells(response) -> dict[str, str | None]:
    return {line.row.name: (line.idle or None) for line in response.context["lines"]}


def test_delivery_idle_column_per_team(personas, world):
    response = client_for(personas.org_admin).get(DELIVERY)
    assert response.status_code == 200
    lines = {line.row.name: line for line in response.context["lines"]}
    assert lines["Detection"].telemetry.idle_gpu_seconds == Decimal("20880")
    assert lines["Vision"].telemetry.idle_gpu_seconds == Decimal("20880")
    assert lines["Language"].telemetry.idle_gpu_seconds == 0
    assert lines["Acme Research"].telemetry.idle_gpu_seconds == Decimal("20880")
    assert idle_cells(response) == {
        "Acme Research": "5.8",
        "Vision": "5.8",
        "Detection": "5.8",
        "Segmentation": None,
        "Language": "0",
        "Translation": "0",
        "Summaries": None,
    }
    html = response.content.decode()
    assert "Allocated but idle" in html and "no telemetry" in html
    assert "Idle time is charged like any other" in html


def test_delivery_pi_sees_their_project_only(personas, world):
    response = client_for(personas.pi).get(DELIVERY)
    assert idle_cells(response) == {"Detection": "5.8"}
