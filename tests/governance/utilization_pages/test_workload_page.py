"""A workload's page: its run's utilization hour by hour.

The day and its figures: ``world.py``.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from tests.governance.utilization_pages.world import (
    client_for,
)

pytestmark = pytest.mark.django_db


def test_workload_page_traces_its_run_per_hour(personas, world):
    run = world["run_a"]
    response = client_for(personas.researcher).get(f"/workloads/{run.workload_id}/")
    assert response.status_code == 200
    (trace,) = response.context["traces"]
    day = world["day"]
    assert [(h["hour"], h["utilization"]) for h in trace.hours] == [
        (day + timedelta(hours=10), Decimal("0.5")),
        (day + timedelta(hours=11), Decimal("0.1")),
    ]
    assert trace.idle_gpu_hours == Decimal("5.8")
    html = response.content.decode()
    assert 'data-figure="run-utilization"' in html
    assert "42.00 %" in html and "5.8 allocated but idle" in html
    assert 'data-testid="idle"' in html  # the idle flag beside it


def test_workload_page_without_telemetry_says_so(personas, world):
    run = world["run_quiet"]
    response = client_for(personas.org_admin).get(f"/workloads/{run.workload_id}/")
    html = response.content.decode()
    assert "No GPU telemetry for this run" in html
    assert 'data-figure="run-utilization"' not in html
    assert "plotly" not in html


def test_workload_page_of_another_project_is_not_shown_to_a_researcher(personas, world):
    run = world["run_b"]
    assert client_for(personas.researcher).get(f"/workloads/{run.workload_id}/").status_code == 404
