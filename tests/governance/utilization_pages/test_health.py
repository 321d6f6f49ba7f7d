"""Cluster health: utilization sums and coverage, the per-project table, idle runs.

The day and its figures: ``world.py``.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from scheduler.choices import RunEndReason
from scheduler.models import Run
from tests.governance.utilization_pages.world import (
    HEALTH,
    client_for,
    ledger,
    yesterday,
)

pytestmark = pytest.mark.django_db


def test_health_utilization_sums_and_coverage_match_the_hand_worked_figures(personas, world):
    response = client_for(personas.org_admin).get(HEALTH)
    assert response.status_code == 200
    use = response.context["use"]
    assert use.total.telemetry.allocated_gpu_seconds == Decimal("46800")
    assert use.total.telemetry.busy_gpu_seconds == Decimal("25920")
    assert use.total.ledger_allocated_gpu_seconds == Decimal("57600")
    assert use.total.coverage == Decimal("0.8125")
    assert round(use.total.utilization, 6) == Decimal("0.553846")
    day = next(d for d in use.days if d.day == world["day"].date())
    assert (day.telemetry.allocated_gpu_seconds, day.telemetry.busy_gpu_seconds) == (46800, 25920)
    assert sum(1 for d in use.days if d.measured) == 1  # the 40-days-ago hour is outside
    html = response.content.decode()
    assert "55.38 %" in html and "81.25 %" in html
    assert "measured <strong>13</strong> of the <strong>16</strong> GPU-hours" in html
    assert 'data-figure="health-utilization"' in html


def test_health_per_project_table_is_most_idle_first_with_exact_figures(personas, world):
    use = client_for(personas.org_admin).get(HEALTH).context["use"]
    names = [row.name for row in use.projects]
    assert names == ["Detection", "Translation", "Segmentation"]
    detection, translation, segmentation = use.projects
    assert detection.telemetry.idle_gpu_seconds == Decimal("20880")
    assert detection.telemetry.busy_gpu_seconds == Decimal("15120")
    assert detection.utilization == Decimal("0.42")
    assert round(detection.coverage, 6) == Decimal("0.833333")
    assert translation.utilization == 1 and translation.telemetry.idle_gpu_seconds == 0
    assert translation.coverage == 1
    assert not segmentation.measured and segmentation.utilization is None
    assert segmentation.ledger_allocated_gpu_seconds == Decimal("3600")


def test_researcher_sees_only_their_projects_rows_and_idle_runs(personas, world):
    response = client_for(personas.researcher).get(HEALTH)
    assert response.status_code == 200
    use = response.context["use"]
    # Cluster-wide per-day figures, as the rest of the pyramid ...
    assert use.total.telemetry.allocated_gpu_seconds == Decimal("46800")
    # ... but only Detection's row and run.
    assert [row.name for row in use.projects] == ["Detection"]
    assert [run.pk for run in use.idle_runs] == [world["run_a"].pk]
    html = response.content.decode()
    assert "translator" not in html and "Translation" not in html
    assert f'href="/workloads/{world["run_a"].workload_id}/"' in html


def test_org_admin_sees_every_idle_run_with_a_link_and_since_when(personas, world):
    response = client_for(personas.org_admin).get(HEALTH)
    runs = response.context["use"].idle_runs
    assert {run.pk for run in runs} == {world["run_a"].pk, world["run_b"].pk}
    html = response.content.decode()
    for run in runs:
        assert f'href="/workloads/{run.workload_id}/"' in html
    assert "detector-notebook" in html and "translator" in html
    assert "45\xa0minutes ago" in html or "45 minutes ago" in html


def test_an_ended_run_is_not_listed_idle(personas, world):
    Run.objects.filter(pk=world["run_b"].pk).update(
        ended_at=timezone.now(), end_reason=RunEndReason.SUCCEEDED
    )
    runs = client_for(personas.org_admin).get(HEALTH).context["use"].idle_runs
    assert [run.pk for run in runs] == [world["run_a"].pk]


def test_no_telemetry_yet_is_said_and_nothing_is_zero_percent(personas):
    ledger(personas, personas.project_a1, yesterday() + timedelta(hours=10), budgeted=3600)
    response = client_for(personas.org_admin).get(HEALTH)
    assert response.status_code == 200
    use = response.context["use"]
    assert not use.has_telemetry and use.total.utilization is None
    html = response.content.decode()
    assert "No GPU telemetry yet" in html and "no GPU telemetry yet" in html
    assert 'data-figure="health-utilization"' not in html
    assert "no telemetry" in html  # Detection's row: ledger time, nothing measured
    assert "0.00 % busy" not in html


@pytest.mark.parametrize(
    "query",
    [
        {"cluster": "abc"},
        {"cluster": "99999999999999999999"},
        {"period": "custom", "start": "2026-13-45", "end": "x"},
        {"period": "<script>"},
        {"period": "custom", "start": "2026-01-10", "end": "2026-01-01"},
    ],
)
def test_bad_query_on_health_is_never_a_500(personas, world, query):
    # The dashboards' rule: say what was wrong and show the default (never a 500).
    response = client_for(personas.org_admin).get(HEALTH, query)
    assert response.status_code == 200
    assert response.context["use"].total.telemetry.allocated_gpu_seconds == Decimal("46800")
