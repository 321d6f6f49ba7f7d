"""What agents report: credentials, registration, heartbeats, order delivery and acks, exits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError

from scheduler.choices import (
    ExitOutcome,
    NodeState,
    NodeStateSource,
    OrderKind,
    OrderState,
    RunEndReason,
    WorkloadState,
)
from scheduler.models import Node, NodeAgent, Order, Run
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.executor_reports import (
    node_agent_authenticate,
    node_agent_create,
    node_heartbeat,
    node_register,
    order_acknowledge,
    orders_deliver,
    run_report_exit,
    token_hash,
)
from scheduler.services.nodes import node_mark_down
from scheduler.services.usage import usage_account
from scheduler.services.workloads import workload_submit
from tests.scheduler.conftest import ledger_total, runs_total

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)

pytestmark = pytest.mark.django_db


def start(world, project="budgeted", *, gpus=8, nodes=1, min_runtime=0, at=T0) -> Run:
    workload = workload_submit(
        project=world.projects[project], cluster=world.cluster, name="job", gpus=gpus,
        nodes=nodes, min_runtime_seconds=min_runtime, launch_spec={"command": ["true"]}, now=at,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=world.cluster.id, now=at)
    return Run.objects.get(workload=workload)


def test_agent_token_is_stored_hashed_and_authenticates(world):
    agent, raw = node_agent_create(cluster=world.cluster, name="node9")

    assert NodeAgent.objects.get(pk=agent.pk).token_hash == token_hash(raw) != raw
    assert node_agent_authenticate(raw_token=raw) == agent
    assert node_agent_authenticate(raw_token=raw + "x") is None
    NodeAgent.objects.filter(pk=agent.pk).update(revoked_at=T0)
    assert node_agent_authenticate(raw_token=raw) is None


def test_register_creates_the_node_and_refuses_zero_gpus(world):
    agent, _ = node_agent_create(cluster=world.cluster, name="node9")

    node = node_register(agent=agent, gpus=4, now=T0)

    assert (node.name, node.gpus, node.last_heartbeat) == ("node9", 4, T0)
    agent.refresh_from_db()
    assert agent.node == node
    with pytest.raises(ValidationError) as refused:
        node_register(agent=agent, gpus=0)
    assert "gpus" in refused.value.message_dict


def test_heartbeat_revives_a_node_the_system_marked_down_but_not_an_operators(world):
    node1, node2 = world.nodes
    node_mark_down(node=node1, reason="silent", source=NodeStateSource.SYSTEM, now=T0)
    node_mark_down(node=node2, actor=world.user, reason="bad DIMM", now=T0)

    assert node_heartbeat(node=node1, now=T0 + SEC).state == NodeState.HEALTHY
    assert node_heartbeat(node=node2, now=T0 + SEC).state == NodeState.DOWN


def test_orders_are_redelivered_until_acknowledged_with_stops_first(world):
    free = start(world, "unbudgeted", gpus=8, min_runtime=0)
    node = free.node_set.get()
    workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name="big", gpus=16, nodes=2,
        min_runtime_seconds=600, launch_spec={"command": ["true"]}, now=T0 + SEC,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 2 * SEC)

    first = orders_deliver(node=node, now=T0 + 3 * SEC)
    again = orders_deliver(node=node, now=T0 + 4 * SEC)

    assert [o.kind for o in first] == [OrderKind.STOP, OrderKind.START, OrderKind.START][
        : len(first)
    ]
    assert first[0].kind == OrderKind.STOP and first[0].run_id == free.id
    assert [o.id for o in again] == [o.id for o in first]
    assert all(o.state == OrderState.DELIVERED for o in again)
    assert Order.objects.get(pk=first[0].pk).delivery_count == 2


def test_stop_acknowledged_ends_the_run_and_requeues_the_workload(world):
    free = start(world, "unbudgeted", gpus=16, nodes=2, min_runtime=0)
    workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name="big", gpus=8,
        min_runtime_seconds=600, launch_spec={"command": ["true"]}, now=T0 + SEC,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 10 * SEC)
    stop1, stop2 = Order.objects.filter(run=free, kind=OrderKind.STOP).order_by("node__name")

    order_acknowledge(order=stop1, now=T0 + 20 * SEC)
    free.refresh_from_db()
    assert free.ended_at is None  # the other node has not confirmed yet
    order_acknowledge(order=stop2, now=T0 + 25 * SEC)

    free.refresh_from_db()
    assert (free.ended_at, free.end_reason) == (T0 + 25 * SEC, RunEndReason.PREEMPTED)
    assert free.workload.state == WorkloadState.PENDING
    assert free.workload.submitted_at == T0  # submit time kept
    usage_account(cluster=world.cluster, now=T0 + 25 * SEC)
    assert ledger_total(world.cluster) == runs_total(world.cluster, now=T0 + 25 * SEC)


def test_exit_reported_ends_the_run_and_the_workload(world):
    run = start(world, gpus=8, min_runtime=600)

    run_report_exit(run=run, outcome=ExitOutcome.SUCCEEDED, exit_code=0, now=T0 + 90 * SEC)

    run.refresh_from_db()
    assert (run.ended_at, run.end_reason, run.exit_code) == (
        T0 + 90 * SEC,
        RunEndReason.SUCCEEDED,
        0,
    )
    assert run.workload.state == WorkloadState.SUCCEEDED
    assert run.workload.finished_at == T0 + 90 * SEC
    assert Order.objects.get(run=run).state == OrderState.VOID  # never acknowledged
    assert ledger_total(world.cluster) == runs_total(world.cluster) == 8 * 90


def test_a_gang_exiting_on_one_node_sends_a_stop_to_the_others(world):
    run = start(world, gpus=16, nodes=2, min_runtime=600)
    node1 = Node.objects.get(cluster=world.cluster, name="node1")

    run_report_exit(run=run, outcome=ExitOutcome.FAILED, exit_code=3, node=node1, now=T0 + SEC)

    (stop,) = Order.objects.filter(run=run, kind=OrderKind.STOP)
    assert stop.node.name == "node2"
    assert stop.payload["reason"] == "gang_exit"
    assert Run.objects.get(pk=run.pk).workload.state == WorkloadState.FAILED


def test_unknown_exit_outcome_is_refused(world):
    run = start(world, gpus=8)
    with pytest.raises(ValidationError) as refused:
        run_report_exit(run=run, outcome="exploded")
    assert "outcome" in refused.value.message_dict
