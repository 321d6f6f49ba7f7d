"""Selectors for pages and the API: preemption history, a cluster's live state; admin pages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.choices import OrderKind, RunEndReason
from scheduler.models import Order, Run
from scheduler.selectors.workloads import cluster_live_state, workload_preemption_history
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.executor_reports import order_acknowledge
from scheduler.services.nodes import node_drain
from scheduler.services.workloads import workload_submit

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)

pytestmark = pytest.mark.django_db


def submit(world, project, *, gpus, nodes=1, min_runtime, at=T0):
    return workload_submit(
        project=world.projects[project], cluster=world.cluster, name="job", gpus=gpus,
        nodes=nodes, min_runtime_seconds=min_runtime, launch_spec={"command": ["true"]}, now=at,
    )  # fmt: skip


def test_preemption_history_names_the_preemptor(world):
    free = submit(world, "unbudgeted", gpus=16, nodes=2, min_runtime=0)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    budgeted = submit(world, "budgeted", gpus=8, min_runtime=600, at=T0 + SEC)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 2 * SEC)
    for stop in Order.objects.filter(kind=OrderKind.STOP):
        order_acknowledge(order=stop, now=T0 + 3 * SEC)

    (run,) = workload_preemption_history(workload=free)

    assert (run.end_reason, run.preempted_by) == (RunEndReason.PREEMPTED, budgeted)


def test_cluster_live_state_counts_gpus_queues_and_the_latest_cycle(world):
    submit(world, "budgeted", gpus=8, min_runtime=600)
    submit(world, "budgeted", gpus=16, nodes=2, min_runtime=600)
    cycle = scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    node_drain(node=world.nodes[1], actor=world.user, now=T0 + SEC)

    state = cluster_live_state(cluster=world.cluster)

    assert (state.gpus, state.healthy_gpus) == (16, 8)
    assert state.allocated_gpus == sum(r.gpus for r in Run.objects.filter(ended_at__isnull=True))
    assert (state.pending, state.running) == (1, 1)
    assert state.latest_cycle == cycle


def test_admin_lists_every_scheduler_model_read_only(world, admin_client):
    submit(world, "budgeted", gpus=8, min_runtime=600)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    for model in [
        "node", "nodeagent", "workload", "run", "order", "usagerecord", "entitlementrecord",
        "usagehour", "schedulingcycle",
    ]:  # fmt: skip
        assert admin_client.get(f"/admin/scheduler/{model}/").status_code == 200
        assert admin_client.get(f"/admin/scheduler/{model}/add/").status_code == 403
