"""Accounting over random histories, checked against plain arithmetic.

Each example plays a random history on a small cluster through the real services — workloads
submitted and started by scheduling cycles, runs ending, nodes going down and coming back,
a share changing mid-hour, accounting passes at random moments (the first one mid-hour) —
then checks what every page and export is built from:
- the ledger holds exactly Σ GPUs x run time of the runs, and ``rebuild_usage`` gives the
  rollup back;
- per project and hour: delivered = budgeted + burst; budgeted never exceeds the entitlement
  of the same seconds, so burst is at least what ran above it;
- the cluster health of each day: availability and occupancy within 0 to 100 %, availability
  exactly 100 % when no node ever left service;
- owed vs delivered: each program row is the sum of its projects', the organization's of its
  programs'; the finance report's total equals the ledger, and the report API gives the same
  GPU-seconds per project.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from governance.choices import Role
from governance.models import Allocation, RoleAssignment
from governance.selectors.health import cluster_health
from governance.selectors.reports import usage_report
from governance.selectors.usage import usage_by_tree_node
from governance.selectors.visibility import user_visibility
from scheduler.choices import RunEndReason
from scheduler.models import Run, UsageHour
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.nodes import node_bring_up, node_mark_down
from scheduler.services.runs import run_end
from scheduler.services.usage import usage_account, usage_rebuild
from scheduler.services.workloads import workload_submit
from tests.scheduler.conftest import build_world, ledger_total, runs_total

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 10, 17, 23, tzinfo=UTC)  # mid-hour, as a fresh installation starts
PROJECTS = ("alpha", "beta", "gamma")

steps = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=50 * 60),  # seconds since the previous step
        st.one_of(
            st.tuples(st.just("submit"), st.sampled_from(PROJECTS), st.sampled_from([1, 2, 4, 8])),
            st.tuples(st.just("end"), st.integers(min_value=0, max_value=20)),
            st.tuples(st.just("down"), st.integers(min_value=0, max_value=2)),
            st.tuples(st.just("up"), st.integers(min_value=0, max_value=2)),
            st.tuples(st.just("share"), st.sampled_from(["10", "40", "70"])),
            st.tuples(st.just("account"), st.just(0)),
        ),
    ),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=steps)
def test_every_figure_agrees_with_the_ledger_at_every_time_scale(db, history):
    with transaction.atomic():
        _check(history)
        transaction.set_rollback(True)


def _check(history) -> None:
    # alpha 50 %, beta 30 %, gamma no share; 3 nodes x 8 GPUs.
    world = build_world(nodes=3, shares={"alpha": "50", "beta": "30", "gamma": None})
    RoleAssignment.objects.create(
        user=world.user, role=Role.ORG_ADMIN, organization=world.cluster.organization
    )
    played = _play(world, history)
    rollup = _check_ledger_and_rollup(world, played.end)
    _check_burst(rollup)
    visibility = user_visibility(user=world.user)
    _check_health(world, visibility, played)
    _check_tree_rows(world, visibility, played.end)
    _check_reports(world, visibility, played.end)


class Played(NamedTuple):
    """How a played history ended: its last accounting pass, and whether a node ever left
    service."""

    end: datetime
    nodes_changed: bool


def _play(world, history) -> Played:
    """Play ``history`` through the real services, then account up to a little after it."""
    now = T0
    nodes_changed = False
    for seconds, (action, arg, *rest) in history:
        now += timedelta(seconds=seconds)
        if action == "submit":
            workload_submit(
                project=world.projects[arg], cluster=world.cluster, name=f"{arg}-{rest[0]}",
                gpus=rest[0], nodes=1, min_runtime_seconds=600,
                launch_spec={"command": ["true"]}, now=now,
            )  # fmt: skip
            scheduling_cycle_run(cluster_id=world.cluster.id, now=now)
        elif action == "end":
            running = list(Run.objects.filter(ended_at__isnull=True).order_by("id"))
            if running:
                run_end(run=running[arg % len(running)], reason=RunEndReason.SUCCEEDED, now=now)
        elif action == "down":
            node = world.nodes[arg]
            node.refresh_from_db()
            if node.state == "healthy":
                node_mark_down(node=node, now=now)
                nodes_changed = True
        elif action == "up":
            node = world.nodes[arg]
            node.refresh_from_db()
            if node.state == "down":
                node_bring_up(node=node, actor=world.user, now=now)
        elif action == "share":
            # A share changed at this very second (mid-hour), as a split applied then would.
            Allocation.objects.create(
                cluster=world.cluster, project=world.projects["alpha"], percent=Decimal(arg),
                valid_from=now, set_by=world.user, reason="Changed mid-hour.",
            )  # fmt: skip
        else:
            usage_account(cluster=world.cluster, now=now)
    end = now + timedelta(minutes=7)
    usage_account(cluster=world.cluster, now=end)
    return Played(end, nodes_changed)


def _rollup(cluster) -> dict:
    """(project, hour) → (budgeted, burst, free, entitled, demand) of the hourly rollup."""
    return {
        (r.project_id, r.hour): (r.budgeted_gpu_seconds, r.burst_gpu_seconds, r.free_gpu_seconds,
                                 r.entitled_gpu_seconds, r.demand_gpu_seconds)
        for r in UsageHour.objects.filter(cluster=cluster)
    }  # fmt: skip


def _check_ledger_and_rollup(world, end: datetime) -> dict:
    """The ledger is the runs, to the microsecond; the rollup is the ledger. Returns the
    rollup."""
    assert ledger_total(world.cluster) == runs_total(world.cluster, now=end)
    rollup = _rollup(world.cluster)
    usage_rebuild(cluster=world.cluster)
    rebuilt = _rollup(world.cluster)
    assert rebuilt == rollup
    return rollup


def _check_burst(rollup: dict) -> None:
    """Burst is what ran above the entitlement of the same seconds."""
    for (project_id, hour), (budgeted, burst, free, entitled, _) in rollup.items():
        assert budgeted <= entitled, (project_id, hour, budgeted, entitled)
        assert burst >= max(budgeted + burst - entitled, 0)
        assert min(budgeted, burst, free, entitled) >= 0


def _check_health(world, visibility, played: Played) -> None:
    """Availability and occupancy of each day within 0 to 100 %; availability exactly 100 %
    when no node ever left service."""
    end = played.end
    first_day = T0.replace(hour=0, minute=0, second=0)
    health = cluster_health(
        visibility=visibility, cluster=world.cluster,
        start=first_day, end=end.replace(hour=0, minute=0, second=0) + timedelta(days=1), now=end,
    )  # fmt: skip
    for day in health.days:
        for ratio in (day.availability, day.occupancy):
            assert ratio is None or 0 <= ratio <= 1, (day.day, ratio)
        if not played.nodes_changed and day.capacity_gpu_seconds:
            assert day.availability == 1, day.day


def _check_tree_rows(world, visibility, end: datetime) -> None:
    """Owed vs delivered: each row is the sum of its children's."""
    rows = usage_by_tree_node(visibility=visibility, cluster=world.cluster, start=T0, end=end)
    assert [row.kind for row in rows][:2] == ["organization", "program"]
    for row in rows:
        assert row.charged_gpu_seconds == row.budgeted_gpu_seconds + row.burst_gpu_seconds
        assert row.owed_delivered_gpu_seconds <= row.owed_gpu_seconds
        assert row.hourly_owed_delivered_gpu_seconds <= row.owed_delivered_gpu_seconds
        children = [r for r in rows if r.parent == row.key]
        if children:
            for name in (
                "budgeted_gpu_seconds",
                "burst_gpu_seconds",
                "free_gpu_seconds",
                "entitled_gpu_seconds",
                "owed_gpu_seconds",
                "demand_gpu_seconds",
                "owed_delivered_gpu_seconds",
                "hourly_owed_delivered_gpu_seconds",
            ):
                assert getattr(row, name) == sum(
                    (getattr(c, name) for c in children), Decimal(0)
                ), (row.name, name)  # fmt: skip


def _check_reports(world, visibility, end: datetime) -> None:
    """The finance report's total equals the ledger; the dashboard's rows and the report API
    give the same GPU-seconds per project."""
    first_day = T0.replace(hour=0, minute=0, second=0)
    report = usage_report(
        visibility=visibility, start=first_day.date(), end=end.date(), level="project"
    )
    assert report.totals.total_gpu_seconds == ledger_total(world.cluster)
    # The dashboard's rows and the finance report agree per project, to the microsecond,
    # over the same whole days.
    last_midnight = end.replace(hour=0, minute=0, second=0) + timedelta(days=1)
    days = usage_by_tree_node(
        visibility=visibility, cluster=world.cluster, start=first_day, end=last_midnight
    )
    for row in days:
        if row.kind == "project" and row.name in {r.project for r in report.rows}:
            mine = next(r for r in report.rows if r.project == row.name)
            assert (row.budgeted_gpu_seconds, row.burst_gpu_seconds, row.free_gpu_seconds) == (
                mine.budgeted_gpu_seconds, mine.burst_gpu_seconds, mine.free_gpu_seconds,
            ), row.name  # fmt: skip
    # The API reads the same report: the same GPU-seconds, to the microsecond, per project.
    api = APIClient()
    api.force_authenticate(world.user)
    body = api.get(
        "/api/reports/usage/",
        {"start": f"{first_day:%Y-%m-%d}", "end": f"{end:%Y-%m-%d}", "level": "project"},
    ).json()
    assert Decimal(body["totals"]["total_gpu_seconds"]) == ledger_total(world.cluster)
    by_name = {r.project: r for r in report.rows}
    for row in body["rows"]:
        mine = by_name[row["project"]]
        for name in ("budgeted_gpu_seconds", "burst_gpu_seconds", "free_gpu_seconds"):
            assert Decimal(row[name]) == getattr(mine, name), (row["project"], name)
