"""The node agent API: tokens, isolation from user auth, registration and heartbeats.

Orders, acknowledgements and exits are in ``test_api_agents_orders.py``; the helpers both use
are in ``tests/scheduler/agent_api.py``, the fixtures in this package's ``conftest.py``.
"""

from __future__ import annotations

import hashlib

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler.choices import (
    NodeState,
    NodeStateSource,
    RunEndReason,
)
from scheduler.models import Node, NodeAgent, Order, Run
from scheduler.services.workloads import workload_submit
from tests.scheduler.agent_api import (
    Agent,
    agent_client,
    started_run,
    user_client,
)

pytestmark = pytest.mark.django_db


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
