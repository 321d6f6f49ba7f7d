"""Cluster health (the metrics pyramid) against PostgreSQL, with hand-worked numbers.

The personas' cluster has 4 nodes x 8 GPUs = 32. Effective shares: Detection 30 %,
Segmentation 18 %, Translation 28 %, Summaries 12 % — 88 % of the cluster is budgeted.
Yesterday, 24 accounted hours; 22 of them quiet (all 32 GPUs healthy, entitlement only), and
two busy ones (GPU-seconds):

hour 10:00, all 32 GPUs healthy — entitled = effective share x 32 x 3600:
  Detection 34,560 (demand 8 GPUs = 28,800, ran nothing), Segmentation 20,736 (no demand),
  Translation 32,256 (demand 36,000; charged 28,800 budgeted + 7,200 burst),
  Summaries 13,824 (demand 14,400; 14,400 on the free lane)
hour 11:00, one node down (24 healthy) — entitled = share x 24 x 3600:
  Detection 25,920 (demand 16 GPUs = 57,600; charged 25,920 budgeted + 31,680 burst),
  Segmentation 15,552, Translation 24,192, Summaries 10,368 (no demand)

Availability = healthy ÷ all: (23 x 32 + 24) x 3600 ÷ (24 x 32 x 3600) = 760 ÷ 768
  = 98.9583 %.
Occupancy = allocated ÷ healthy: (36,000 + 14,400 + 57,600) ÷ (760 x 3600)
  = 108,000 ÷ 2,736,000 = 3.9474 %.
Owed = Σ min(entitled, demand): Detection 28,800 + 25,920 = 54,720; Translation 32,256;
  Summaries 13,824; total 100,800.
Impact (delivery ratio of the day) = Σ min(charged, owed) ÷ Σ owed
  = (min(57,600, 54,720) + min(36,000, 32,256) + 0) ÷ 100,800 = 86,976 ÷ 100,800 = 86.2857 %.
Hourly = (0 + 25,920 + 32,256 + 0) ÷ 100,800 = 58,176 ÷ 100,800 = 57.7143 %.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from governance.models import UsageDay
from governance.selectors.health import cluster_health
from governance.selectors.visibility import user_visibility
from governance.services.reports import usage_days_refresh
from scheduler.choices import NodeState, RunEndReason, RunLane, WorkloadState
from scheduler.models import (
    AccountingCursor,
    Node,
    Run,
    RunNode,
    SchedulingCycle,
    UsageHour,
    Workload,
)

pytestmark = pytest.mark.django_db


def today_midnight() -> datetime:
    return timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def hour_row(personas, project, hour, **seconds) -> None:
    UsageHour.objects.create(
        cluster=personas.cluster,
        project=project,
        hour=hour,
        **{f"{name}_gpu_seconds": Decimal(value) for name, value in seconds.items()},
    )


QUIET_ENTITLED = {
    "Detection": 34560,
    "Segmentation": 20736,
    "Translation": 32256,
    "Summaries": 13824,
}


def build_two_hours(personas) -> datetime:
    """Yesterday's 24 accounted hours (module docstring); returns yesterday 00:00 UTC."""
    day = today_midnight() - timedelta(days=1)
    h10, h11 = day + timedelta(hours=10), day + timedelta(hours=11)
    a1, a2, b1, b2 = personas.projects
    for hour in range(24):
        if hour not in (10, 11):
            for project in personas.projects:
                entitled = QUIET_ENTITLED[project.name]
                hour_row(personas, project, day + timedelta(hours=hour), entitled=entitled)
    hour_row(personas, a1, h10, entitled=34560, demand=28800)
    hour_row(personas, a2, h10, entitled=20736)
    hour_row(personas, b1, h10, entitled=32256, demand=36000, budgeted=28800, burst=7200)
    hour_row(personas, b2, h10, entitled=13824, demand=14400, free=14400)
    hour_row(personas, a1, h11, entitled=25920, demand=57600, budgeted=25920, burst=31680)
    hour_row(personas, a2, h11, entitled=15552)
    hour_row(personas, b1, h11, entitled=24192)
    hour_row(personas, b2, h11, entitled=10368)
    return day


@pytest.fixture
def yesterday(personas):
    return build_two_hours(personas)


def health_for(personas, user, day):
    return cluster_health(
        visibility=user_visibility(user=user),
        cluster=personas.cluster,
        start=day,
        end=day + timedelta(days=1),
    )


def test_pyramid_of_a_day_matches_the_hand_worked_figures(personas, yesterday):
    report = health_for(personas, personas.org_admin, yesterday)
    assert report.gpus == 32  # no node registered: the cluster's size
    [day] = report.days
    assert day.day == yesterday
    assert day.known_hours == 24
    assert day.healthy_gpu_seconds == Decimal(760 * 3600)
    assert round(day.availability, 6) == Decimal("0.989583")
    assert day.allocated_gpu_seconds == Decimal(108000)
    assert round(day.occupancy, 6) == Decimal("0.039474")
    assert day.owed_gpu_seconds == Decimal(100800)
    assert day.owed_delivered_gpu_seconds == Decimal(86976)
    assert round(day.impact, 6) == Decimal("0.862857")
    assert round(day.hourly_impact, 6) == Decimal("0.577143")
    assert round(day.availability_pct, 2) == Decimal("98.96")


def test_totals_are_ratios_of_sums_over_the_days(personas, yesterday):
    # A second day: one accounted hour, all healthy, nobody asked for anything. The other 23
    # hours were not accounted: they count as unavailable (the day is measured whole).
    day2 = yesterday - timedelta(days=1)
    for project in personas.projects:
        share = {"Detection": 30, "Segmentation": 18, "Translation": 28, "Summaries": 12}
        hour_row(personas, project, day2 + timedelta(hours=3), entitled=share[project.name] * 1152)
    report = cluster_health(
        visibility=user_visibility(user=personas.finance),
        cluster=personas.cluster,
        start=day2,
        end=yesterday + timedelta(days=1),
    )
    assert [d.day for d in report.days] == [day2, yesterday]
    first = report.days[0]
    assert first.availability == Decimal(1) / Decimal(24)
    assert first.occupancy == Decimal(0)
    assert first.impact is None  # nothing owed: no delivery ratio, not 0 %
    totals = report.totals
    assert totals.known_hours == 48
    assert totals.availability == Decimal(32 + 760) / Decimal(48 * 32)
    assert totals.impact == Decimal(86976) / Decimal(100800)


def test_hours_with_no_entitlement_are_unknown_not_unhealthy(personas):
    day = today_midnight() - timedelta(days=3)
    hour_row(personas, personas.project_a1, day + timedelta(hours=1), free=3600)
    report = health_for(personas, personas.org_admin, day)
    [only] = report.days
    assert only.known_hours == 0
    assert only.availability is None and only.occupancy is None
    assert only.allocated_gpu_seconds == Decimal(3600)
    assert report.has_usage_data


def make_run(personas, node, *, gpus, started, min_runtime, **fields) -> Run:
    workload = Workload.objects.create(
        project=personas.project_a1,
        cluster=personas.cluster,
        name="train",
        gpus=gpus,
        min_runtime_seconds=min_runtime,
        state=WorkloadState.RUNNING,
        submitted_at=started,
    )
    run = Run.objects.create(
        workload=workload,
        attempt=1,
        project=personas.project_a1,
        cluster=personas.cluster,
        gpus=gpus,
        lane=RunLane.CHARGED,
        placement={node.name: gpus},
        started_at=started,
        accounted_until=started,
        **fields,
    )
    RunNode.objects.create(run=run, node=node, gpus=gpus)
    return run


def test_nodes_by_state_and_drains(personas):
    now = timezone.now()
    nodes = {
        name: Node.objects.create(cluster=personas.cluster, name=name, gpus=8, state=state)
        for name, state in [
            ("n1", NodeState.HEALTHY),
            ("n2", NodeState.HEALTHY),
            ("n3", NodeState.DRAINING),
            ("n4", NodeState.DOWN),
        ]
    }
    n3 = nodes["n3"]
    n3.state_changed_at = now - timedelta(hours=1)
    n3.state_changed_by = personas.org_admin
    n3.state_reason = "ECC errors"
    n3.save()
    started = now - timedelta(hours=2)
    make_run(personas, n3, gpus=4, started=started, min_runtime=4 * 3600)
    make_run(personas, n3, gpus=2, started=started, min_runtime=3 * 3600)
    # A finished drain of n2 yesterday: evictions at 08:00 and 09:30, drained at 10:00.
    day = today_midnight() - timedelta(days=1)
    for minutes in (0, 90):
        make_run(
            personas,
            nodes["n2"],
            gpus=1,
            started=day,
            min_runtime=3600,
            stop_requested_at=day + timedelta(hours=8, minutes=minutes),
            stop_reason=RunEndReason.DRAINED,
            ended_at=day + timedelta(hours=8, minutes=minutes + 1),
            end_reason=RunEndReason.DRAINED,
        )
    SchedulingCycle.objects.create(
        cluster=personas.cluster,
        started_at=day + timedelta(hours=10),
        duration_seconds=0.1,
        policy="fairshare",
        drained_nodes=["n2"],
    )
    report = health_for(personas, personas.program_manager, day)
    assert report.gpus == 32
    states = {c.state: (c.nodes, c.gpus) for c in report.nodes_by_state}
    assert states == {"healthy": (2, 16), "draining": (1, 8), "drained": (0, 0), "down": (1, 8)}
    [drain] = report.drains_in_progress
    assert drain.node.name == "n3" and drain.reason == "ECC errors"
    assert drain.by == personas.org_admin
    assert (drain.running, drain.gpus_in_use) == (2, 6)
    assert drain.protected_until == started + timedelta(hours=4)
    [finished] = report.finished_drains
    assert finished.node_name == "n2"
    assert finished.evictions == 2
    assert finished.first_eviction == day + timedelta(hours=8)
    assert finished.duration == timedelta(hours=2)
    assert finished.duration_label == "2 h 00 min"


def test_outsider_cannot_read_a_cluster_health(personas, yesterday):
    with pytest.raises(PermissionDenied):
        health_for(personas, personas.outsider, yesterday)


def test_closed_days_read_from_the_daily_cache_give_the_same_figures(personas, yesterday):
    before = health_for(personas, personas.org_admin, yesterday).days[0]
    AccountingCursor.objects.create(
        cluster=personas.cluster, accounted_until=today_midnight() + timedelta(hours=2)
    )
    assert usage_days_refresh(cluster=personas.cluster) >= 1
    assert UsageDay.objects.filter(cluster=personas.cluster, day=yesterday.date()).count() == 4
    after = health_for(personas, personas.org_admin, yesterday).days[0]
    for name in (
        "healthy_gpu_seconds",
        "capacity_gpu_seconds",
        "allocated_gpu_seconds",
        "owed_gpu_seconds",
        "owed_delivered_gpu_seconds",
        "hourly_owed_delivered_gpu_seconds",
    ):
        assert getattr(after, name) == getattr(before, name), name
    assert after.owed_delivered_gpu_seconds == Decimal(86976)


def test_kept_closed_days_follow_the_nodes_and_the_shares(personas, yesterday):
    """Yesterday is final (accounting is two hours into today): it is kept, but not past a
    change of what it was computed from. 32 GPUs: capacity 32 x 86,400 GPU-seconds; with a
    registered 8-GPU node the page's GPUs are 8, and capacity 8 x 86,400. A share corrected
    for all time changes the effective share healthy time is read through."""
    from governance.models import Allocation

    AccountingCursor.objects.create(
        cluster=personas.cluster, accounted_until=today_midnight() + timedelta(hours=2)
    )
    assert usage_days_refresh(cluster=personas.cluster) >= 1
    first, again = (health_for(personas, personas.org_admin, yesterday).days[0] for _ in "12")
    assert first.capacity_gpu_seconds == again.capacity_gpu_seconds == Decimal(32 * 86400)
    assert again.healthy_gpu_seconds == first.healthy_gpu_seconds == Decimal(760 * 3600)
    Node.objects.create(cluster=personas.cluster, name="n1", gpus=8)
    day = health_for(personas, personas.org_admin, yesterday).days[0]
    assert day.capacity_gpu_seconds == Decimal(8 * 86400)
    # Vision 60 % → 30 %: Detection and Segmentation hold half the effective share they did,
    # so their entitlement reads as twice the healthy GPUs.
    Allocation.objects.filter(program=personas.program_a).update(percent=Decimal(30))
    day = health_for(personas, personas.org_admin, yesterday).days[0]
    assert day.healthy_gpu_seconds != first.healthy_gpu_seconds


def test_occupancy_is_at_most_100_percent_while_a_draining_node_finishes_work():
    """A full cluster whose one node drains: its runs are allocated until they end, its GPUs
    are no longer healthy. 31 healthy nodes' worth of seconds, 32 nodes' worth allocated:
    the day reads 100 %, not 103.23 %."""
    from governance.selectors.health import HealthDay

    day = HealthDay(day=today_midnight())
    day.healthy_gpu_seconds = Decimal(31 * 8 * 3600)
    day.allocated_known_gpu_seconds = Decimal(32 * 8 * 3600)
    assert day.occupancy == 1 and day.occupancy_pct == 100
    day.allocated_known_gpu_seconds = Decimal(31 * 8 * 1800)
    assert day.occupancy == Decimal("0.5")


def test_kept_ledger_per_project_follows_today_and_a_late_import(personas, yesterday):
    """The utilization level's per-project ledger time keeps yesterday (final) and reads
    today every time; a late import into yesterday gives the daily cache a new generation,
    and the kept sums follow it. Yesterday allocated (charged + free): Detection 57,600,
    Translation 36,000, Summaries 14,400 GPU-seconds."""
    from governance.selectors.health_utilization import cluster_utilization
    from governance.services.reports import usage_days_reopen

    today = today_midnight()
    AccountingCursor.objects.create(
        cluster=personas.cluster, accounted_until=today + timedelta(hours=2)
    )
    assert usage_days_refresh(cluster=personas.cluster) >= 1

    def ledger() -> dict[str, Decimal]:
        use = cluster_utilization(
            visibility=user_visibility(user=personas.org_admin),
            cluster=personas.cluster,
            start=yesterday,
            end=today + timedelta(hours=2),
            ledger_by_day={},
        )
        return {p.name: p.ledger_allocated_gpu_seconds for p in use.projects}

    expected = {
        "Detection": Decimal(57600),
        "Translation": Decimal(36000),
        "Summaries": Decimal(14400),
    }
    assert ledger() == expected
    _a1, a2, b1, _b2 = personas.projects
    hour_row(personas, a2, today + timedelta(hours=1), budgeted=1800)
    assert ledger() == {**expected, a2.name: Decimal(1800)}
    UsageHour.objects.filter(
        cluster=personas.cluster, project=b1, hour=yesterday + timedelta(hours=12)
    ).update(burst_gpu_seconds=Decimal(3600))
    usage_days_reopen(cluster_id=personas.cluster.pk, since=yesterday.date())
    assert ledger() == {**expected, a2.name: Decimal(1800), b1.name: Decimal(39600)}
