"""Operator actions and heartbeat expiry: drain (carried out by the engine), mark down."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from scheduler.choices import (
    NodeState,
    OrderKind,
    OrderState,
    RunEndReason,
    WorkloadState,
)
from scheduler.models import Node, Order, Run
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.executor_reports import node_heartbeat, order_acknowledge
from scheduler.services.nodes import (
    node_bring_up,
    node_drain,
    node_mark_down,
    node_undrain,
    nodes_expire_heartbeats,
)
from scheduler.services.workloads import workload_submit
from tests.scheduler.conftest import build_world, ledger_total, runs_total

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)

pytestmark = pytest.mark.django_db


def submit(world, *, gpus=8, min_runtime=600, at=T0, project="budgeted"):
    return workload_submit(
        project=world.projects[project], cluster=world.cluster, name="job", gpus=gpus,
        min_runtime_seconds=min_runtime, launch_spec={"command": ["true"]}, now=at,
    )  # fmt: skip


def test_drain_evicts_each_workload_once_past_its_minimum_runtime_then_the_node_drains(db):
    world = build_world(nodes=3)
    short = submit(world, gpus=4, min_runtime=300)
    long = submit(world, gpus=4, min_runtime=900)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    node = Node.objects.get(name=Run.objects.get(workload=short).placement.popitem()[0])
    assert set(Run.objects.get(workload=long).placement) == {node.name}  # bin-packed

    node_drain(node=node, actor=world.user, reason="fan failure", now=T0 + 10 * SEC)
    newcomer = submit(world, gpus=2, at=T0 + 20 * SEC)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 30 * SEC)

    assert set(Run.objects.get(workload=newcomer).placement) != {node.name}
    assert not Order.objects.filter(kind=OrderKind.STOP).exists()  # both protected

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 301 * SEC)
    short_run = Run.objects.get(workload=short)
    (stop,) = Order.objects.filter(kind=OrderKind.STOP)
    assert stop.run == short_run and short_run.stop_reason == RunEndReason.DRAINED
    order_acknowledge(order=stop, now=T0 + 305 * SEC)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 310 * SEC)
    node.refresh_from_db()
    assert node.state == NodeState.DRAINING  # the long one is still protected

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 901 * SEC)
    long_stop = Order.objects.get(kind=OrderKind.STOP, run__workload=long)
    order_acknowledge(order=long_stop, now=T0 + 905 * SEC)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 910 * SEC)

    node.refresh_from_db()
    assert node.state == NodeState.DRAINED
    assert Run.objects.get(pk=short_run.pk).end_reason == RunEndReason.DRAINED
    # Both were requeued and started again elsewhere.
    for workload in (short, long):
        runs = Run.objects.filter(workload=workload).order_by("attempt")
        assert [r.attempt for r in runs] == [1, 2]
        assert node.name not in runs[1].placement


def test_undrain_returns_the_node_and_draining_a_down_node_is_refused(world):
    node1, node2 = world.nodes
    node_drain(node=node1, actor=world.user, now=T0)
    assert node_undrain(node=node1, actor=world.user, now=T0 + SEC).state == NodeState.HEALTHY
    node_mark_down(node=node2, actor=world.user, now=T0)
    with pytest.raises(ValidationError):
        node_drain(node=node2, actor=world.user)
    assert node_bring_up(node=node2, actor=world.user).state == NodeState.HEALTHY


def test_mark_down_ends_runs_voids_orders_and_requeues(world):
    workload = submit(world, gpus=8)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    run = Run.objects.get(workload=workload)
    node = run.node_set.get()

    node_mark_down(node=node, actor=world.user, reason="PSU", now=T0 + 60 * SEC)

    run.refresh_from_db()
    workload.refresh_from_db()
    assert (run.ended_at, run.end_reason) == (T0 + 60 * SEC, RunEndReason.NODE_DOWN)
    assert workload.state == WorkloadState.PENDING and workload.submitted_at == T0
    assert Order.objects.get(run=run).state == OrderState.VOID
    assert ledger_total(world.cluster) == runs_total(world.cluster) == 8 * 60


@override_settings(SCHEDULER_AGENT_TIMEOUT_SECONDS=30)
def test_silent_agent_gets_its_node_marked_down_and_comes_back(world):
    node1, node2 = world.nodes
    node_heartbeat(node=node1, now=T0)
    node_heartbeat(node=node2, now=T0 + 20 * SEC)
    gang = workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name="gang", gpus=16,
        nodes=2, min_runtime_seconds=600, launch_spec={"command": ["true"]}, now=T0,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    run = Run.objects.get(workload=gang)

    expired = nodes_expire_heartbeats(now=T0 + 40 * SEC)

    assert [n.name for n in expired] == ["node1"]
    assert expired[0].state == NodeState.DOWN
    run.refresh_from_db()
    assert (run.ended_at, run.end_reason) == (T0 + 40 * SEC, RunEndReason.NODE_DOWN)
    assert Run.objects.get(pk=run.pk).workload.state == WorkloadState.PENDING
    # The gang's process on the live node is told to stop.
    (stop,) = Order.objects.filter(run=run, kind=OrderKind.STOP)
    assert (stop.node, stop.payload["reason"]) == (node2, RunEndReason.NODE_DOWN)
    assert ledger_total(world.cluster) == runs_total(world.cluster) == 16 * 40

    assert node_heartbeat(node=node1, now=T0 + 45 * SEC).state == NodeState.HEALTHY
    node_heartbeat(node=node2, now=T0 + 45 * SEC)
    assert nodes_expire_heartbeats(now=T0 + 55 * SEC) == []
