"""The day sums the pages read, kept by the hour rows, and the period readers.

The day and its figures: ``world.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from scheduler.models import UtilizationHour
from tests.scheduler.test_utilization_store import node_of

pytestmark = pytest.mark.django_db


def day_sums(personas, day: datetime) -> tuple:
    from scheduler.models import UtilizationDay

    row = UtilizationDay.objects.get(
        cluster=personas.cluster, project=personas.project_a1, day=day.date()
    )
    return row.allocated_gpu_seconds, row.busy_gpu_seconds


def test_day_sums_follow_every_insert_update_and_delete_of_the_hour_rows(personas):
    from scheduler.services.utilization import utilization_report
    from tests.scheduler.test_utilization_store import T0, item, run_on

    node = node_of(personas.cluster, "node-1")
    run = run_on(personas, node)  # Detection, 4 GPUs, from 2026-03-02 09:00 UTC
    start, day = T0, T0.replace(hour=0)
    # Through the agents' own path: 4 GPUs for 5 minutes = 1,200 GPU-seconds, 300 busy.
    period = item(run, start, start + timedelta(minutes=5), 1200, 300)
    utilization_report(node=node, reports=[period], now=start + timedelta(minutes=5))
    assert day_sums(personas, day) == (Decimal("1200"), Decimal("300"))
    # The next report folds into the same hour row (an update): 600 more, all busy.
    later = item(run, start + timedelta(minutes=5), start + timedelta(minutes=7.5), 600, 600)
    utilization_report(node=node, reports=[later], now=start + timedelta(minutes=8))
    assert day_sums(personas, day) == (Decimal("1800"), Decimal("900"))
    UtilizationHour.objects.filter(run=run).delete()
    assert day_sums(personas, day) == (Decimal("0"), Decimal("0"))


def test_a_period_of_part_days_is_read_from_the_hour_rows(personas, world):
    from governance.selectors.telemetry import telemetry_sums

    day = world["day"]
    # 10:30 to 11:30 takes only the 11:00 hour of Detection (7,200 / 720).
    sums = telemetry_sums(
        cluster_ids=[personas.cluster.pk],
        start=day + timedelta(hours=10, minutes=30),
        end=day + timedelta(hours=11, minutes=30),
    )
    (telemetry,) = sums.values()
    assert (telemetry.allocated_gpu_seconds, telemetry.busy_gpu_seconds) == (7200, 720)
    whole = telemetry_sums(
        cluster_ids=[personas.cluster.pk], start=day, end=day + timedelta(days=1), per="month"
    )
    assert (
        whole[
            (day.date().replace(day=1), personas.project_a1.pk, personas.cluster.pk)
        ].busy_gpu_seconds
        == 15120
    )


def test_days_and_projects_give_the_same_sums_either_way(personas, world):
    from governance.selectors import telemetry

    day = world["day"]
    start, end = day - timedelta(days=45), day + timedelta(days=1)
    days, projects = telemetry.telemetry_days_and_projects(
        cluster_id=personas.cluster.pk, start=start, end=end
    )
    rows = telemetry._days_and_projects_union(personas.cluster.pk, start.date(), end.date())
    union_days = {d: (a, b) for d, p, a, b in rows if d is not None}
    union_projects = {p: (a, b) for d, p, a, b in rows if d is None}
    grouped_days = {d: (t.allocated_gpu_seconds, t.busy_gpu_seconds) for d, t in days.items()}
    assert (
        grouped_days
        == union_days
        == {
            day.date(): (Decimal("46800"), Decimal("25920")),
            (day - timedelta(days=40)).date(): (Decimal("3600"), Decimal("0")),
        }
    )
    assert (
        {p: (t.allocated_gpu_seconds, t.busy_gpu_seconds) for p, t in projects.items()}
        == (union_projects)
        == {
            personas.project_a1.pk: (Decimal("36000"), Decimal("15120")),
            personas.project_b1.pk: (Decimal("14400"), Decimal("10800")),
        }
    )
