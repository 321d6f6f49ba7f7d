"""Estimated start: the live engine run forward from the database's state (hand-worked)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.choices import WorkloadState
from scheduler.selectors.estimates import cluster_estimate_compute
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.workloads import workload_submit
from tests.scheduler.conftest import build_world

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
HOUR = 3600


def submit(world, name, gpus, *, at, duration=None, min_runtime=HOUR, project="budgeted"):
    return workload_submit(
        project=world.projects[project],
        cluster=world.cluster,
        name=name,
        gpus=gpus,
        min_runtime_seconds=min_runtime,
        launch_spec={"command": ["train"]},
        declared_duration_seconds=duration,
        submitted_by=world.user,
        now=at,
    )


def test_running_work_ends_as_declared_then_queue_starts_with_backfill():
    world = build_world(nodes=1, shares={"budgeted": "100"})
    a = submit(world, "a", 8, at=T0, duration=3 * HOUR)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    a.refresh_from_db()
    assert a.state == WorkloadState.RUNNING
    b = submit(world, "b", 4, at=T0 + timedelta(minutes=10), duration=HOUR)
    c = submit(world, "c", 8, at=T0 + timedelta(minutes=20), duration=2 * HOUR)
    d = submit(world, "d", 4, at=T0 + timedelta(minutes=30), duration=HOUR)

    estimate = cluster_estimate_compute(cluster=world.cluster, now=T0 + timedelta(hours=1))

    # a (8 GPUs, 3 h) frees the node at 13:00; b takes 4 GPUs, c (8) cannot fit, d (4)
    # backfills beside b; both end at 14:00 and c starts then.
    assert estimate.starts == {
        b.pk: datetime(2026, 3, 2, 13, 0, tzinfo=UTC),
        c.pk: datetime(2026, 3, 2, 14, 0, tzinfo=UTC),
        d.pk: datetime(2026, 3, 2, 13, 0, tzinfo=UTC),
    }
    assert not estimate.truncated


def test_resumable_work_done_before_counts_against_its_declared_duration():
    world = build_world(nodes=1, shares={"budgeted": "100"})
    a = submit(world, "a", 8, at=T0, duration=2 * HOUR)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    b = submit(world, "b", 8, at=T0 + timedelta(minutes=5), duration=HOUR)

    estimate = cluster_estimate_compute(cluster=world.cluster, now=T0 + timedelta(minutes=90))

    # a started at 10:00 and declared 2 h: it ends at 12:00, whenever the estimate is made.
    assert a.pk not in estimate.starts
    assert estimate.starts == {b.pk: datetime(2026, 3, 2, 12, 0, tzinfo=UTC)}


def test_work_without_declared_duration_keeps_the_queue_past_the_horizon():
    world = build_world(nodes=1, shares={"budgeted": "100"})
    submit(world, "forever", 8, at=T0)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    waiting = submit(world, "waiting", 8, at=T0 + timedelta(minutes=1), duration=HOUR)

    estimate = cluster_estimate_compute(cluster=world.cluster, now=T0 + timedelta(hours=2))

    assert waiting.pk not in estimate.starts
    assert estimate.starts == {}
    assert estimate.horizon_end == T0 + timedelta(hours=2) + timedelta(days=7)


def test_estimate_writes_nothing():
    world = build_world(nodes=1, shares={"budgeted": "100"})
    submit(world, "a", 8, at=T0, duration=HOUR)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    b = submit(world, "b", 8, at=T0 + timedelta(minutes=1), duration=HOUR)

    estimate = cluster_estimate_compute(cluster=world.cluster, now=T0 + timedelta(minutes=2))

    assert estimate.starts == {b.pk: datetime(2026, 3, 2, 11, 0, tzinfo=UTC)}
    b.refresh_from_db()
    assert b.state == WorkloadState.PENDING
    assert b.runs.count() == 0


def test_step_bound_stops_a_long_estimate():
    world = build_world(nodes=1, shares={"budgeted": "100"})
    submit(world, "a", 8, at=T0, duration=10 * HOUR)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    submit(world, "b", 8, at=T0 + timedelta(minutes=1), duration=HOUR)

    estimate = cluster_estimate_compute(cluster=world.cluster, now=T0, max_steps=3)

    assert estimate.truncated
    assert estimate.starts == {}
