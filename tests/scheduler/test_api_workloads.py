"""Researchers' workload API: submit, validation, list, detail with history, cancel."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler.choices import OrderKind, RunEndReason, WorkloadState
from scheduler.models import Node, Order, Workload
from scheduler.services.workloads import workload_submit
from tests.scheduler.agent_api import started_run

pytestmark = pytest.mark.django_db


URL = "/api/workloads/"


def client_for(user) -> APIClient:
    """An API client that authenticates with the user's real token."""
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def submit_body(personas, **overrides) -> dict:
    body = {
        "project": personas.project_a1.pk,
        "gpus": 4,
        "min_runtime_seconds": 1800,
        "launch_spec": {"command": ["python", "train.py"]},
    }
    body.update(overrides)
    return body


def make_workload(project, cluster, user=None, **kwargs) -> Workload:
    kwargs.setdefault("launch_spec", {"command": ["sleep", "1"]})
    return workload_submit(
        project=project,
        cluster=cluster,
        name=kwargs.pop("name", "job"),
        gpus=kwargs.pop("gpus", 1),
        submitted_by=user,
        **kwargs,
    )


# --- submit ---------------------------------------------------------------------------------


def test_researcher_submits_to_their_project(personas):
    response = client_for(personas.researcher).post(URL, submit_body(personas), format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["state"] == "pending"
    assert data["project"]["slug"] == "detection"
    assert data["cluster"]["slug"] == "h100"  # the organization's only cluster
    assert data["submitted_by"] == "researcher"
    assert data["min_runtime_seconds"] == 1800
    assert data["runs"] == []
    assert data["engine_reason"]
    workload = Workload.objects.get(pk=data["id"])
    assert workload.submitted_by == personas.researcher
    assert workload.name == "python train.py"


def test_submit_by_project_and_cluster_slug_with_all_fields(personas):
    body = submit_body(
        personas,
        project="detection",
        cluster="h100",
        name="gang",
        gpus=16,
        nodes=2,
        priority=5,
        resumable=False,
        declared_duration_seconds=600,
    )
    response = client_for(personas.pi).post(URL, body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["name"], data["gpus"], data["nodes"], data["priority"]) == ("gang", 16, 2, 5)
    assert data["resumable"] is False
    assert data["declared_duration_seconds"] == 600


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"gpus": 0}, "gpus"),
        ({"gpus": -2}, "gpus"),
        ({"gpus": 33}, "gpus"),  # the cluster has 4 x 8 GPUs
        ({"gpus": "many"}, "gpus"),
        ({"gpus": 12, "nodes": 2}, "nodes"),  # a gang takes whole nodes
        ({"gpus": 12}, "nodes"),  # more than one node's worth without whole nodes
        ({"nodes": 0}, "nodes"),
        ({"min_runtime_seconds": -1}, "min_runtime_seconds"),
        ({"min_runtime_seconds": 8 * 3600 + 1}, "min_runtime_seconds"),
        ({"launch_spec": "python train.py"}, "launch_spec"),
        ({"launch_spec": {}}, "launch_spec"),
        ({"launch_spec": None}, "launch_spec"),
        ({"declared_duration_seconds": 0}, "declared_duration_seconds"),
        ({"project": 999999}, "project"),
        ({"project": "no-such-project"}, "project"),
        ({"cluster": "no-such-cluster"}, "cluster"),
        ({"name": ""}, "name"),
        ({"priority": 10**6}, "priority"),
    ],
)
def test_bad_submissions_are_refused_naming_the_field(personas, overrides, field):
    body = submit_body(personas, **overrides)
    response = client_for(personas.researcher).post(URL, body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"], response.json()
    assert not Workload.objects.exists()


def test_missing_fields_are_named(personas):
    response = client_for(personas.researcher).post(URL, {}, format="json")
    assert response.status_code == 400
    assert {"project", "gpus", "launch_spec"} <= set(response.json()["errors"])


@pytest.mark.parametrize("persona", ["researcher", "pi"])
def test_submit_to_a_project_you_do_not_belong_to_is_refused(personas, persona):
    body = submit_body(personas, project=personas.project_b1.pk)
    response = client_for(personas.users[persona]).post(URL, body, format="json")
    assert response.status_code == 400
    assert "project" in response.json()["errors"]
    assert not Workload.objects.exists()


@pytest.mark.parametrize("persona", ["org_admin", "program_manager", "finance", "outsider"])
def test_only_members_of_a_project_submit_to_it(personas, persona):
    # An org admin sees the project but does not belong to it: same answer as a stranger.
    response = client_for(personas.users[persona]).post(URL, submit_body(personas), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["project"] == [
        f"No project you belong to is '{personas.project_a1.pk}'."
    ]


def test_anonymous_cannot_submit(personas):
    response = APIClient().post(URL, submit_body(personas), format="json")
    assert response.status_code in (401, 403)
    assert not Workload.objects.exists()


# --- list and detail ------------------------------------------------------------------------


@pytest.fixture
def workloads(personas):
    """Two workloads in project A1 (researcher's and PI's), one in A2, one in B1."""
    c = personas.cluster
    return {
        "mine": make_workload(personas.project_a1, c, personas.researcher, name="mine"),
        "pis": make_workload(personas.project_a1, c, personas.pi, name="pis"),
        "a2": make_workload(personas.project_a2, c, personas.org_admin, name="a2"),
        "b1": make_workload(personas.project_b1, c, personas.org_admin, name="b1"),
    }


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ("researcher", {"mine", "pis"}),
        ("pi", {"mine", "pis"}),
        ("program_manager", {"mine", "pis", "a2"}),
        ("org_admin", {"mine", "pis", "a2", "b1"}),
        ("finance", {"mine", "pis", "a2", "b1"}),
        ("outsider", set()),
    ],
)
def test_list_shows_workloads_of_visible_projects(personas, workloads, persona, expected):
    response = client_for(personas.users[persona]).get(URL)
    assert response.status_code == 200
    assert {w["name"] for w in response.json()["results"]} == expected


def test_list_filters_by_state_project_and_mine(personas, workloads):
    Workload.objects.filter(pk=workloads["pis"].pk).update(state=WorkloadState.RUNNING)
    client = client_for(personas.researcher)
    by_state = client.get(URL, {"state": "running"}).json()["results"]
    assert [w["name"] for w in by_state] == ["pis"]
    mine = client.get(URL, {"mine": "true"}).json()["results"]
    assert [w["name"] for w in mine] == ["mine"]
    admin = client_for(personas.org_admin)
    by_project = admin.get(URL, {"project": personas.project_b1.pk}).json()["results"]
    assert [w["name"] for w in by_project] == ["b1"]
    assert client.get(URL, {"state": "sleeping"}).status_code == 400


def test_detail_shows_position_reason_and_preemption_history(personas, workloads):
    node = Node.objects.create(cluster=personas.cluster, name="n1", gpus=8)
    victim = workloads["mine"]
    started_run(victim, node, ended_reason=RunEndReason.PREEMPTED, by=workloads["pis"])
    Workload.objects.filter(pk=workloads["pis"].pk).update(queue_key=-5)
    Workload.objects.filter(pk=victim.pk).update(
        queue_key=7, engine_reason="Waiting for 1 GPU; project over budget."
    )
    response = client_for(personas.researcher).get(f"{URL}{victim.pk}/")
    assert response.status_code == 200
    data = response.json()
    assert data["queue_position"] == 2
    listed = client_for(personas.researcher).get(URL).json()["results"]
    assert {w["name"]: w["queue_position"] for w in listed} == {"mine": 2, "pis": 1}
    assert data["engine_reason"] == "Waiting for 1 GPU; project over budget."
    assert data["preemptions"] == 1
    (run,) = data["runs"]
    assert run["end_reason"] == "preempted"
    assert run["preempted_by"] == workloads["pis"].pk
    assert run["placement"] == {"n1": 1}


@pytest.mark.parametrize("persona", ["researcher", "pi", "program_manager", "outsider"])
def test_detail_of_an_invisible_workload_is_404(personas, workloads, persona):
    response = client_for(personas.users[persona]).get(f"{URL}{workloads['b1'].pk}/")
    assert response.status_code == 404


# --- cancel ---------------------------------------------------------------------------------


def test_cancel_your_own_pending_workload(personas, workloads):
    client = client_for(personas.researcher)
    response = client.post(f"{URL}{workloads['mine'].pk}/cancel/")
    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"
    # Cancelling again changes nothing.
    again = client.post(f"{URL}{workloads['mine'].pk}/cancel/")
    assert again.status_code == 200
    assert again.json()["state"] == "cancelled"


def test_cancel_a_running_workload_orders_its_stop(personas, workloads):
    node = Node.objects.create(cluster=personas.cluster, name="n1", gpus=8)
    run = started_run(workloads["mine"], node)
    response = client_for(personas.researcher).post(f"{URL}{workloads['mine'].pk}/cancel/")
    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"
    stop = Order.objects.get(run=run, kind=OrderKind.STOP)
    assert stop.node == node
    run.refresh_from_db()
    assert run.ended_at is None  # it ends when the agent confirms the stop


def test_a_teammate_cannot_cancel_your_workload(personas, workloads):
    other = client_for(personas.researcher).post(f"{URL}{workloads['pis'].pk}/cancel/")
    assert other.status_code == 403
    workloads["pis"].refresh_from_db()
    assert workloads["pis"].state == WorkloadState.PENDING


@pytest.mark.parametrize("persona", ["pi", "org_admin"])
def test_a_pi_or_org_admin_may_cancel_in_their_scope(personas, workloads, persona):
    response = client_for(personas.users[persona]).post(f"{URL}{workloads['mine'].pk}/cancel/")
    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"


@pytest.mark.parametrize("persona", ["researcher", "pi", "outsider"])
def test_cancelling_an_invisible_workload_is_404(personas, workloads, persona):
    response = client_for(personas.users[persona]).post(f"{URL}{workloads['b1'].pk}/cancel/")
    assert response.status_code == 404
    workloads["b1"].refresh_from_db()
    assert workloads["b1"].state == WorkloadState.PENDING


def test_finance_reads_but_cannot_cancel(personas, workloads):
    response = client_for(personas.finance).post(f"{URL}{workloads['b1'].pk}/cancel/")
    assert response.status_code == 403


# --- schema ---------------------------------------------------------------------------------


def test_openapi_schema_lists_the_scheduler_endpoints(personas):
    response = client_for(personas.researcher).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in [
        "/api/workloads/",
        "/api/workloads/{id}/",
        "/api/workloads/{id}/cancel/",
        "/api/nodes/{id}/drain/",
        "/api/nodes/{id}/undrain/",
        "/api/nodes/{id}/mark-down/",
        "/api/node-agents/",
        "/api/agent/register/",
        "/api/agent/heartbeat/",
        "/api/agent/orders/fetch/",
        "/api/agent/orders/{order_id}/ack/",
        "/api/agent/runs/{run_id}/exit/",
    ]:
        assert path in paths, path
    assert "agentToken" in response.json()["components"]["securitySchemes"]


def test_launch_spec_is_shown_to_its_owners_only_and_env_values_never(personas):
    spec = {"command": ["python", "train.py"], "env": {"WANDB_API_KEY": "s3cr3t-value"}}
    submitted = client_for(personas.researcher).post(
        URL, submit_body(personas, launch_spec=spec), format="json"
    )
    assert submitted.status_code == 201
    body = submitted.json()
    assert body["launch_spec"] == {
        "command": ["python", "train.py"],
        "env": {"WANDB_API_KEY": "********"},
    }
    assert "s3cr3t" not in submitted.content.decode()
    pk = body["id"]
    # The workload itself keeps the real value: the agent's start order carries it.
    assert Workload.objects.get(pk=pk).launch_spec["env"]["WANDB_API_KEY"] == "s3cr3t-value"
    for persona in ("researcher", "pi", "org_admin"):  # the submitter, the PI, an org admin
        shown = client_for(personas.users[persona]).get(f"{URL}{pk}/").json()["launch_spec"]
        assert shown["env"] == {"WANDB_API_KEY": "********"}, persona
    for persona in ("program_manager", "finance"):  # see the workload, not what it runs
        response = client_for(personas.users[persona]).get(f"{URL}{pk}/")
        assert response.status_code == 200, persona
        assert response.json()["launch_spec"] is None, persona
        listed = client_for(personas.users[persona]).get(URL).json()["results"]
        assert all(w["launch_spec"] is None for w in listed), persona
        assert "s3cr3t" not in response.content.decode()
