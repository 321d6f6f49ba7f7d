"""The node agent API: tokens, isolation from user auth, orders, acknowledgements, exits."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler.choices import (
    NodeState,
    NodeStateSource,
    OrderKind,
    OrderState,
    RunEndReason,
    RunLane,
    WorkloadState,
)
from scheduler.models import Node, NodeAgent, Order, Run, RunNode, UsageRecord, Workload
from scheduler.services.executor_reports import node_agent_create, node_register
from scheduler.services.runs import run_request_stop
from scheduler.services.workloads import workload_cancel, workload_submit
from tests.personas import build_personas

pytestmark = pytest.mark.django_db


@pytest.fixture
def personas(db):
    """The six personas and their tree (tests/personas.py): one cluster of 4 x 8 GPUs."""
    return build_personas()


def user_client(user) -> APIClient:
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def agent_client(raw_token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw_token}")
    return client


class Agent:
    """An agent's credentials and a client that uses them."""

    def __init__(self, cluster, name: str, *, register: bool = True):
        self.record, self.token = node_agent_create(cluster=cluster, name=name)
        self.client = agent_client(self.token)
        self.node = node_register(agent=self.record, gpus=8) if register else None

    def post(self, path: str, body: dict | None = None):
        return self.client.post(f"/api/agent/{path}", body or {}, format="json")


@pytest.fixture
def agent(personas):
    return Agent(personas.cluster, "node-1")


@pytest.fixture
def other_agent(personas):
    return Agent(personas.cluster, "node-2")


def started_run(workload: Workload, node: Node, *, minutes_ago: float = 10) -> Run:
    """The rows a scheduling cycle writes when it starts ``workload`` on ``node``."""
    started = timezone.now() - timedelta(minutes=minutes_ago)
    run = Run.objects.create(
        workload=workload,
        attempt=workload.runs.count() + 1,
        project=workload.project,
        cluster=workload.cluster,
        gpus=workload.gpus,
        lane=RunLane.FREE if workload.min_runtime_seconds == 0 else RunLane.CHARGED,
        placement={node.name: workload.gpus},
        started_at=started,
        start_reason="fits",
        accounted_until=started,
    )
    RunNode.objects.create(run=run, node=node, gpus=workload.gpus)
    Order.objects.create(
        kind=OrderKind.START,
        cluster=workload.cluster,
        node=node,
        run=run,
        idempotency_key=f"start:{run.pk}:{node.pk}",
        payload={
            "workload": workload.pk,
            "run": run.pk,
            "attempt": run.attempt,
            "gpus": workload.gpus,
            "gang_nodes": [node.name],
            "launch_spec": workload.launch_spec,
            "resumable": workload.resumable,
            "declared_duration_seconds": None,
            "remaining_seconds": None,
        },
        created_at=started,
    )
    Workload.objects.filter(pk=workload.pk).update(
        state=WorkloadState.RUNNING, first_started_at=started
    )
    return run


@pytest.fixture
def workload(personas):
    return workload_submit(
        project=personas.project_a1,
        cluster=personas.cluster,
        name="train",
        gpus=4,
        min_runtime_seconds=600,
        launch_spec={"command": ["python", "train.py"]},
        submitted_by=personas.researcher,
    )


def ledger_total(run: Run) -> Decimal:
    return UsageRecord.objects.filter(run=run).aggregate(s=Sum("gpu_seconds"))["s"] or Decimal(0)


def exact_gpu_seconds(run: Run) -> Decimal:
    seconds = Decimal((run.ended_at - run.started_at) / timedelta(microseconds=1)) / 10**6
    return run.gpus * seconds


# --- agent tokens ---------------------------------------------------------------------------


def test_org_admin_creates_an_agent_token_shown_once(personas):
    client = user_client(personas.org_admin)
    body = {"cluster": personas.cluster.pk, "name": "gpu-07"}
    response = client.post("/api/node-agents/", body, format="json")
    assert response.status_code == 201, response.json()
    token = response.json()["token"]
    agent = NodeAgent.objects.get(name="gpu-07")
    assert agent.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(NodeAgent.objects.values_list())  # only the digest is stored
    listed = client.get("/api/node-agents/").json()["results"]
    assert [(a["name"], a["token_prefix"]) for a in listed] == [("gpu-07", token[:8])]
    assert "token" not in listed[0]
    # The new token works on the agent API.
    registered = agent_client(token).post(
        "/api/agent/register/", {"node": "gpu-07", "gpus": 8}, format="json"
    )
    assert registered.status_code == 200, registered.json()


@pytest.mark.parametrize(
    ("persona", "status"),
    [("researcher", 403), ("pi", 403), ("program_manager", 403), ("finance", 403)],
)
def test_only_org_admins_create_agent_tokens(personas, persona, status):
    body = {"cluster": personas.cluster.pk, "name": "gpu-07"}
    response = user_client(personas.users[persona]).post("/api/node-agents/", body, format="json")
    assert response.status_code == status
    assert not NodeAgent.objects.exists()


def test_an_outsider_does_not_see_the_cluster(personas):
    body = {"cluster": personas.cluster.pk, "name": "gpu-07"}
    response = user_client(personas.outsider).post("/api/node-agents/", body, format="json")
    assert response.status_code == 404
    assert "cluster" in response.json()["errors"]


@pytest.mark.parametrize(("name", "field"), [("", "name"), ("bad name!", "name")])
def test_bad_agent_names_are_refused(personas, name, field):
    body = {"cluster": personas.cluster.pk, "name": name}
    response = user_client(personas.org_admin).post("/api/node-agents/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_one_agent_per_node_name(personas, agent):
    body = {"cluster": personas.cluster.pk, "name": "node-1"}
    response = user_client(personas.org_admin).post("/api/node-agents/", body, format="json")
    assert response.status_code == 400
    assert "name" in response.json()["errors"]


# --- isolation of agent tokens and user credentials ------------------------------------------

AGENT_CALLS = [
    ("register/", {"node": "node-1", "gpus": 8}),
    ("heartbeat/", {"running": []}),
    ("orders/fetch/", {}),
    ("orders/1/ack/", {}),
    ("runs/1/exit/", {"outcome": "succeeded"}),
]


@pytest.mark.parametrize(("path", "body"), AGENT_CALLS)
def test_a_user_token_does_not_work_on_agent_endpoints(personas, agent, path, body):
    response = user_client(personas.org_admin).post(f"/api/agent/{path}", body, format="json")
    assert response.status_code == 401


@pytest.mark.parametrize(("path", "body"), AGENT_CALLS)
def test_a_signed_in_browser_session_does_not_work_on_agent_endpoints(personas, path, body):
    client = APIClient()
    client.force_login(personas.org_admin)
    assert client.post(f"/api/agent/{path}", body, format="json").status_code == 401


@pytest.mark.parametrize(("path", "body"), AGENT_CALLS)
def test_agent_endpoints_need_a_token(path, body, db):
    assert APIClient().post(f"/api/agent/{path}", body, format="json").status_code == 401


@pytest.mark.parametrize(
    "path", ["/api/workloads/", "/api/nodes/", "/api/projects/", "/api/node-agents/"]
)
def test_an_agent_token_does_not_work_on_user_endpoints(agent, path):
    # User endpoints know only sessions and user tokens: an agent token is an invalid token
    # (a 403 there, because DRF answers 401 only when the first scheme sends a challenge).
    for response in (agent.client.get(path), agent.client.post(path, {}, format="json")):
        assert response.status_code in (401, 403)
        assert response.json()["detail"] == "Invalid token."


def test_a_revoked_agent_token_is_refused(agent):
    NodeAgent.objects.filter(pk=agent.record.pk).update(revoked_at=timezone.now())
    assert agent.post("heartbeat/").status_code == 401


# --- register and heartbeat -------------------------------------------------------------------


def test_register_creates_the_node_and_says_how_often_to_heartbeat(personas):
    fresh = Agent(personas.cluster, "gpu-01", register=False)
    body = {"node": "gpu-01", "gpus": 4, "gpu_indices": ["0", "1", "2", "3"], "version": "1"}
    response = fresh.post("register/", body)
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["node"] == "gpu-01" and data["cluster"] == "h100"
    assert data["state"] == "healthy"
    assert data["heartbeat_seconds"] > 0
    assert data["open_runs"] == []
    node = Node.objects.get(cluster=personas.cluster, name="gpu-01")
    assert node.gpus == 4 and node.last_heartbeat is not None
    fresh.record.refresh_from_db()
    assert fresh.record.node == node


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"node": "someone-else", "gpus": 8}, "node"),
        ({"node": "node-1", "gpus": 0}, "gpus"),
        ({"node": "node-1", "gpus": 2, "gpu_indices": ["0"]}, "gpu_indices"),
        ({"gpus": 8}, "node"),
    ],
)
def test_bad_registrations_are_refused(agent, body, field):
    response = agent.post("register/", body)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_an_unregistered_agent_must_register_first(personas):
    fresh = Agent(personas.cluster, "gpu-09", register=False)
    assert fresh.post("heartbeat/").status_code == 409
    assert fresh.post("orders/fetch/").status_code == 409


def test_heartbeat_revives_a_node_the_system_marked_down(agent):
    Node.objects.filter(pk=agent.node.pk).update(
        state=NodeState.DOWN, state_source=NodeStateSource.SYSTEM
    )
    response = agent.post("heartbeat/", {"running": []})
    assert response.status_code == 200
    assert response.json()["state"] == "healthy"


def test_heartbeat_keeps_an_operators_down(agent):
    Node.objects.filter(pk=agent.node.pk).update(
        state=NodeState.DOWN, state_source=NodeStateSource.OPERATOR
    )
    assert agent.post("heartbeat/").json()["state"] == "down"


def test_heartbeat_names_runs_the_agent_must_stop(agent, workload, personas):
    open_run = started_run(workload, agent.node)
    other = workload_submit(
        project=personas.project_a1,
        cluster=personas.cluster,
        name="old",
        gpus=1,
        launch_spec={"command": ["true"]},
    )
    ended = started_run(other, agent.node)
    Run.objects.filter(pk=ended.pk).update(
        ended_at=timezone.now(), end_reason=RunEndReason.NODE_DOWN
    )
    body = {"running": [str(open_run.pk), str(ended.pk), "not-a-run"]}
    response = agent.post("heartbeat/", body)
    assert response.json()["stop_runs"] == [ended.pk]


def test_re_registering_lists_the_runs_the_server_believes_are_there(agent, workload):
    run = started_run(workload, agent.node)
    start = Order.objects.get(run=run)
    agent.post(f"orders/{start.pk}/ack/")
    response = agent.post("register/", {"node": "node-1", "gpus": 8})
    assert response.json()["open_runs"] == [run.pk]


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
    assert "Requeued" in workload.engine_reason


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
