"""The node agent API: order delivery, redelivery and acknowledgements, and run exits."""

from __future__ import annotations

import pytest

from scheduler.choices import OrderState, RunEndReason, WorkloadState
from scheduler.models import Order, Run, UsageRecord, Workload
from scheduler.services.runs import run_request_stop
from scheduler.services.workloads import workload_cancel, workload_submit
from tests.scheduler.agent_api import exact_gpu_seconds, ledger_total, started_run

pytestmark = pytest.mark.django_db


# --- orders: delivery, redelivery, acknowledgements --------------------------------------------


def test_fetch_delivers_orders_with_their_payload(agent, workload):
    run = started_run(workload, agent.node)
    response = agent.post("orders/fetch/")
    assert response.status_code == 200
    (order,) = response.json()["orders"]
    assert order["kind"] == "start"
    assert order["run"] == run.pk and order["workload"] == workload.pk
    assert order["gpus"] == 4
    assert order["launch_spec"] == {"command": ["python", "train.py"]}
    assert order["idempotency_key"] == f"start:{run.pk}:{agent.node.pk}"
    assert Order.objects.get(pk=order["id"]).state == OrderState.DELIVERED


def test_the_same_order_delivered_twice_is_harmless(agent, workload):
    run = started_run(workload, agent.node)
    first = agent.post("orders/fetch/").json()["orders"]
    second = agent.post("orders/fetch/").json()["orders"]
    # Until acknowledged the order comes again, with the same id and idempotency key, so an
    # agent that lost the first answer gets it again and one that did not can skip it.
    assert [o["id"] for o in first] == [o["id"] for o in second]
    assert first[0]["idempotency_key"] == second[0]["idempotency_key"]
    assert second[0]["delivery_count"] == 2
    assert Order.objects.filter(run=run).count() == 1
    assert Run.objects.filter(workload=workload).count() == 1
    ack = agent.post(f"orders/{first[0]['id']}/ack/", {"status": "started"})
    assert ack.json() == {"id": first[0]["id"], "state": "acknowledged"}
    assert agent.post("orders/fetch/").json()["orders"] == []


def test_acknowledging_twice_changes_nothing(agent, workload):
    run = started_run(workload, agent.node)
    order = Order.objects.get(run=run)
    agent.post(f"orders/{order.pk}/ack/")
    order.refresh_from_db()
    first_ack = order.acknowledged_at
    again = agent.post(f"orders/{order.pk}/ack/")
    assert again.status_code == 200
    order.refresh_from_db()
    assert order.acknowledged_at == first_ack


def test_another_agents_orders_and_runs_are_404(agent, other_agent, workload):
    run = started_run(workload, agent.node)
    order = Order.objects.get(run=run)
    assert other_agent.post("orders/fetch/").json()["orders"] == []
    assert other_agent.post(f"orders/{order.pk}/ack/").status_code == 404
    exit_response = other_agent.post(f"runs/{run.pk}/exit/", {"outcome": "failed"})
    assert exit_response.status_code == 404
    order.refresh_from_db()
    run.refresh_from_db()
    assert order.state == OrderState.CREATED and run.ended_at is None
    assert agent.post("orders/999999/ack/").status_code == 404


def test_stops_come_before_starts(agent, workload, personas):
    running = started_run(workload, agent.node)
    newcomer = workload_submit(
        project=personas.project_a1,
        cluster=personas.cluster,
        name="next",
        gpus=4,
        launch_spec={"command": ["true"]},
    )
    started_run(newcomer, agent.node, minutes_ago=0)
    Order.objects.filter(run=running).update(state=OrderState.ACKNOWLEDGED)
    run_request_stop(run=running, reason=RunEndReason.PREEMPTED, preempted_by=newcomer)
    kinds = [o["kind"] for o in agent.post("orders/fetch/").json()["orders"]]
    assert kinds == ["stop", "start"]


# --- exits ----------------------------------------------------------------------------------


def test_exit_success_ends_the_run_and_the_workload_once(agent, workload):
    run = started_run(workload, agent.node)
    response = agent.post(f"runs/{run.pk}/exit/", {"outcome": "succeeded", "exit_code": 0})
    assert response.status_code == 200
    assert response.json() == {"id": run.pk, "state": "succeeded"}
    run.refresh_from_db()
    workload.refresh_from_db()
    assert workload.state == WorkloadState.SUCCEEDED and workload.exit_code == 0
    assert run.end_reason == RunEndReason.SUCCEEDED
    total = ledger_total(run)
    assert total == exact_gpu_seconds(run)
    rows = UsageRecord.objects.filter(run=run).count()

    # The same exit reported twice — or a contradicting late report — changes nothing.
    again = agent.post(f"runs/{run.pk}/exit/", {"outcome": "failed", "exit_code": 1})
    assert again.status_code == 200
    ended_at = run.ended_at
    run.refresh_from_db()
    workload.refresh_from_db()
    assert run.ended_at == ended_at and run.end_reason == RunEndReason.SUCCEEDED
    assert workload.state == WorkloadState.SUCCEEDED
    assert UsageRecord.objects.filter(run=run).count() == rows
    assert ledger_total(run) == total


def test_exit_failure_records_the_code(agent, workload):
    run = started_run(workload, agent.node)
    agent.post(f"runs/{run.pk}/exit/", {"outcome": "failed", "exit_code": 3})
    workload.refresh_from_db()
    assert (workload.state, workload.exit_code) == (WorkloadState.FAILED, 3)


def test_preempted_exit_requeues_the_workload(agent, workload, personas):
    run = started_run(workload, agent.node)
    run_request_stop(run=run, reason=RunEndReason.PREEMPTED, explanation="by a budgeted job")
    Workload.objects.filter(pk=workload.pk).update(state=WorkloadState.PREEMPTED)
    response = agent.post(f"runs/{run.pk}/exit/", {"outcome": "preempted", "exit_code": -15})
    assert response.json()["state"] == "preempted"
    workload.refresh_from_db()
    assert workload.state == WorkloadState.PENDING
    assert "Requeued" in workload.reason


def test_a_stop_acknowledged_after_the_process_ended_ends_a_cancelled_run(agent, workload):
    run = started_run(workload, agent.node)
    workload_cancel(workload=workload)
    (stop,) = agent.post("orders/fetch/").json()["orders"][:1]
    assert stop["kind"] == "stop" and stop["reason"] == "cancelled"
    assert stop["grace_seconds"] > 0
    run.refresh_from_db()
    assert run.ended_at is None  # still charged until the agent confirms
    agent.post(f"orders/{stop['id']}/ack/", {"status": "stopped"})
    run.refresh_from_db()
    workload.refresh_from_db()
    assert run.end_reason == RunEndReason.CANCELLED
    assert workload.state == WorkloadState.CANCELLED and workload.finished_at is not None
    assert ledger_total(run) == exact_gpu_seconds(run)


def test_bad_exit_reports_are_refused(agent, workload):
    run = started_run(workload, agent.node)
    response = agent.post(f"runs/{run.pk}/exit/", {"outcome": "exploded"})
    assert response.status_code == 400
    assert "outcome" in response.json()["errors"]
    run.refresh_from_db()
    assert run.ended_at is None
