"""A scheduling cycle against the database: starts, orders, reasons, preemption, CAS.

What one cycle leaves for the next is in ``test_services_cycle_across.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from scheduler.choices import OrderKind, OrderState, RunEndReason, RunLane, WorkloadState
from scheduler.models import (
    Order,
    ProjectStanding,
    Run,
    RunNode,
    SchedulingCycle,
    UsageHour,
    Workload,
)
from scheduler.selectors.queue_positions import queue_positions
from scheduler.selectors.workloads import with_standing
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.runs import run_end
from scheduler.services.workloads import workload_cancel, workload_submit
from tests.scheduler.conftest import build_world

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def submit(world, project="budgeted", *, gpus=8, nodes=1, min_runtime=600, at=T0, **kw):
    return workload_submit(
        project=world.projects[project], cluster=world.cluster, name=f"job-{project}-{gpus}",
        gpus=gpus, nodes=nodes, min_runtime_seconds=min_runtime,
        launch_spec={"command": ["python", "train.py"]}, now=at, **kw,
    )  # fmt: skip


def test_cycle_starts_a_submitted_workload_with_a_run_and_a_start_order(world):
    workload = submit(world, gpus=4)

    cycle = scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=5))

    workload.refresh_from_db()
    assert workload.state == WorkloadState.RUNNING
    assert workload.first_started_at == T0 + timedelta(seconds=5)
    assert workload.queue_key is None
    run = Run.objects.get(workload=workload)
    assert run.attempt == 1
    assert run.lane == RunLane.CHARGED
    assert sum(run.placement.values()) == 4
    (run_node,) = RunNode.objects.filter(run=run)
    assert run_node.gpus == 4 and run_node.node.name in run.placement
    (order,) = Order.objects.filter(run=run)
    assert order.kind == OrderKind.START
    assert order.state == OrderState.CREATED
    assert order.node_id == run_node.node_id
    assert order.idempotency_key == f"start:{run.id}:{run_node.node_id}"
    assert order.payload["launch_spec"] == {"command": ["python", "train.py"]}
    assert order.payload["gpus"] == 4
    assert cycle.starts == 1 and cycle.orders == 1 and cycle.pending == 1


def test_a_gang_gets_one_start_order_per_whole_node(world):
    workload = submit(world, gpus=16, nodes=2)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)

    run = Run.objects.get(workload=workload)
    assert run.placement == {"node1": 8, "node2": 8}
    orders = Order.objects.filter(run=run, kind=OrderKind.START)
    assert sorted(o.node.name for o in orders) == ["node1", "node2"]
    assert all(o.payload["gang_nodes"] == ["node1", "node2"] for o in orders)


def test_free_lane_run_is_marked_free(world):
    workload = submit(world, "unbudgeted", gpus=2, min_runtime=0)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)

    assert Run.objects.get(workload=workload).lane == RunLane.FREE


def test_pending_workloads_get_a_reason_and_a_queue_position(world):
    for _ in range(2):
        submit(world, gpus=8)
    waiting_first = submit(world, gpus=8, at=T0 + timedelta(seconds=1))
    waiting_second = submit(world, "unbudgeted", gpus=8, at=T0 + timedelta(seconds=2))

    cycle = scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=10))

    waiting_first.refresh_from_db()
    waiting_second.refresh_from_db()
    assert waiting_first.state == waiting_second.state == WorkloadState.PENDING
    positions = queue_positions([waiting_first, waiting_second])
    assert positions == {waiting_first.id: 1, waiting_second.id: 2}
    assert "waiting for 8 GPUs" in waiting_first.reason
    assert "no budget share" in waiting_second.reason
    assert sum(cycle.reasons_summary.values()) == 2


def test_workloads_move_up_without_their_queue_keys_being_rewritten(world):
    """When the work ahead starts, the ones behind move up: their positions are counted
    from keys that stay as they were, so a cycle does not rewrite every pending row."""
    running = [submit(world, gpus=8) for _ in range(2)]
    waiting = [submit(world, gpus=4, at=T0 + timedelta(seconds=1 + i)) for i in range(5)]
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=10))
    keys = dict(
        Workload.objects.filter(pk__in=[w.pk for w in waiting]).values_list("pk", "queue_key")
    )
    assert queue_positions(Workload.objects.filter(pk__in=keys)) == {
        w.pk: place for place, w in enumerate(waiting, start=1)
    }

    run_end(
        run=Run.objects.get(workload=running[0]), reason=RunEndReason.SUCCEEDED,
        now=T0 + timedelta(seconds=20), exit_code=0,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=30))

    started = set(
        Workload.objects.filter(pk__in=keys, state=WorkloadState.RUNNING).values_list(
            "pk", flat=True
        )
    )
    assert started == {waiting[0].pk, waiting[1].pk}
    still = Workload.objects.filter(pk__in=keys, state=WorkloadState.PENDING)
    assert dict(still.values_list("pk", "queue_key")) == {
        pk: key for pk, key in keys.items() if pk not in started
    }
    assert queue_positions(still) == {w.pk: place for place, w in enumerate(waiting[2:], start=1)}


def test_a_second_cycle_does_not_start_anything_twice(world):
    workload = submit(world, gpus=8)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=5))

    assert Run.objects.filter(workload=workload).count() == 1
    assert Order.objects.filter(kind=OrderKind.START).count() == 1
    assert SchedulingCycle.objects.filter(cluster=world.cluster).count() == 2


def test_cancelled_pending_workload_is_not_started(world):
    workload = submit(world, gpus=8)
    workload_cancel(workload=workload, now=T0)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=5))

    workload.refresh_from_db()
    assert workload.state == WorkloadState.CANCELLED
    assert not Run.objects.filter(workload=workload).exists()


def test_budgeted_work_preempts_free_lane_work_and_stop_orders_go_out(world):
    free = submit(world, "unbudgeted", gpus=16, nodes=2, min_runtime=0)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    free_run = Run.objects.get(workload=free)
    budgeted = submit(world, gpus=8, at=T0 + timedelta(seconds=30))

    cycle = scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=60))

    free.refresh_from_db()
    free_run.refresh_from_db()
    budgeted.refresh_from_db()
    assert cycle.preemptions == 1
    assert free.state == WorkloadState.PREEMPTED
    assert free_run.ended_at is None  # ends when the agents confirm the stop
    assert free_run.stop_reason == RunEndReason.PREEMPTED
    assert free_run.preempted_by_id == budgeted.id
    stops = Order.objects.filter(run=free_run, kind=OrderKind.STOP)
    assert sorted(o.node.name for o in stops) == ["node1", "node2"]
    assert budgeted.state == WorkloadState.RUNNING
    # The preempted workload is not offered to the engine while its stop is pending.
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=65))
    assert Run.objects.filter(workload=free).count() == 1


def test_cycle_for_unknown_cluster_does_nothing(db):
    assert scheduling_cycle_run(cluster_id=987654) is None


def _charged_hour(world, slug: str, hour: datetime, gpus: int) -> None:
    """One accounted hour of ``gpus`` GPUs charged to project ``slug``."""
    seconds = Decimal(gpus * 3600)
    UsageHour.objects.create(
        project=world.projects[slug], cluster=world.cluster, hour=hour,
        budgeted_gpu_seconds=seconds, burst_gpu_seconds=0, free_gpu_seconds=0,
        entitled_gpu_seconds=seconds, demand_gpu_seconds=seconds,
    )  # fmt: skip


def test_a_new_ranking_rewrites_where_projects_stand_not_every_pending_reason():
    """Where a project stands is kept once per project: when the window's ranking swaps two
    projects, each pending workload reads its project's new rank while its own row (its
    part of the reason) is not written again."""
    world = build_world(shares={"alpha": "50", "beta": "50"})
    for slug in ("alpha", "beta"):  # the cluster is full: 8 GPUs each, protected for hours
        submit(world, slug, gpus=8, min_runtime=28800)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=5))
    waiting = [
        submit(world, slug, gpus=4, min_runtime=3600, at=T0 + timedelta(seconds=6 + i))
        for i, slug in enumerate(["alpha", "beta"] * 3)
    ]
    _charged_hour(world, "beta", T0 - timedelta(hours=2), gpus=16)  # beta used more
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=10))
    stored = {
        w.pk: (w.engine_reason, w.reason_follows_standing)
        for w in Workload.objects.filter(pk__in=[w.pk for w in waiting])
    }
    assert all(follows for _, follows in stored.values()), stored
    before = {w.pk: w.reason for w in with_standing(Workload.objects.filter(pk__in=stored))}
    for w in waiting:
        slug = w.project.slug
        rank, above = ("1 of 2", "no more than") if slug == "alpha" else ("2 of 2", "more than")
        assert before[w.pk].startswith(
            f"project used {above} its share over the window (rank {rank} in program research); "
        ), before[w.pk]

    _charged_hour(world, "alpha", T0 - timedelta(hours=1), gpus=48)  # now alpha used more
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=20))

    rows = Workload.objects.filter(pk__in=stored)
    assert {w.pk: (w.engine_reason, w.reason_follows_standing) for w in rows} == stored
    after = {w.pk: w.reason for w in with_standing(rows)}
    for w in waiting:
        slug = w.project.slug
        rank, above = ("2 of 2", "more than") if slug == "alpha" else ("1 of 2", "no more than")
        assert after[w.pk] == before[w.pk].replace(
            before[w.pk].split("; ")[0],
            f"project used {above} its share over the window (rank {rank} in program research)",
        )
        # A workload read on its own (its page) says the same.
        assert Workload.objects.get(pk=w.pk).reason == after[w.pk]
    assert ProjectStanding.objects.filter(cluster=world.cluster).count() == 2
