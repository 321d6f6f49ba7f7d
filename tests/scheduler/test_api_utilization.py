"""``POST /api/agent/utilization/`` and ``GET/PUT /api/clusters/{id}/idle-policy/``."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler.models import IdlePolicy, UtilizationHour
from scheduler.services.workloads import workload_submit
from tests.factories import ClusterFactory, OrganizationFactory, UserFactory
from tests.scheduler.agent_api import Agent, started_run, user_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(personas):
    return Agent(personas.cluster, "node-1")


def submit(personas, cluster, name="train"):
    return workload_submit(
        project=personas.project_a1,
        cluster=cluster,
        name=name,
        gpus=4,
        min_runtime_seconds=600,
        launch_spec={"command": ["python", "train.py"]},
        submitted_by=personas.researcher,
    )


def period(run, minutes_ago: int, minutes: int = 1, busy="120", **extra) -> dict:
    end = timezone.now() - timedelta(minutes=minutes_ago)
    start = end - timedelta(minutes=minutes)
    return {
        "run": run.pk,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "allocated_gpu_seconds": str(4 * 60 * minutes),
        "busy_gpu_seconds": busy,
        "samples": 12,
        **extra,
    }


# --- The agent endpoint --------------------------------------------------------------------


def test_agent_reports_are_stored(personas, agent):
    run = started_run(submit(personas, personas.cluster), agent.node, minutes_ago=30)
    body = {
        "reports": [
            period(run, 3, memory_max_mib=1024, power_mean_watts="300.5"),
            period(run, 2),
            period(run, 1, busy=None),
        ]
    }
    response = agent.post("utilization/", body)
    assert response.status_code == 201, response.json()
    assert response.json()["repeated"] == 0 and response.json()["no_telemetry"] == 1
    totals = [(r.allocated_gpu_seconds, r.busy_gpu_seconds) for r in UtilizationHour.objects.all()]
    assert sum(a for a, _ in totals) == Decimal(480)
    assert sum(b for _, b in totals) == Decimal(240)
    # The same periods again store nothing more.
    again = agent.post("utilization/", body)
    assert again.status_code == 200
    assert again.json() == {"stored": 0, "repeated": 2, "no_telemetry": 1}


def test_bad_item_is_named_by_index_and_nothing_is_stored(personas, agent):
    run = started_run(submit(personas, personas.cluster), agent.node, minutes_ago=30)
    body = {
        "reports": [
            period(run, 5),
            period(run, 4, busy="241"),  # busy > allocated (240)
            period(run, 3, busy="abc"),
            period(run, 2, allocated_gpu_seconds="NaN"),
        ]
    }
    response = agent.post("utilization/", body)
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert "reports[2].busy_gpu_seconds" in errors
    assert "reports[3].allocated_gpu_seconds" in errors
    assert not UtilizationHour.objects.exists()
    # With the malformed ones fixed, the rule breach is named by the service.
    body["reports"] = body["reports"][:2]
    response = agent.post("utilization/", body)
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["reports[1].busy_gpu_seconds"]
    assert not UtilizationHour.objects.exists()


def test_list_shape_and_size(personas, agent):
    run = started_run(submit(personas, personas.cluster), agent.node, minutes_ago=30)
    for body in ({}, {"reports": []}, {"reports": "x"}, {"reports": [period(run, 1)] * 1001}):
        response = agent.post("utilization/", body)
        assert response.status_code == 400
        assert "reports" in response.json()["errors"]


def test_runs_of_other_nodes_and_clusters_are_refused(personas, agent):
    other = Agent(personas.cluster, "node-2")
    theirs = started_run(submit(personas, personas.cluster, "b"), other.node, minutes_ago=30)
    foreign_cluster = ClusterFactory(organization=personas.organization, name="a", slug="a")
    far_agent = Agent(foreign_cluster, "node-1")
    far = started_run(submit(personas, foreign_cluster, "c"), far_agent.node, minutes_ago=30)
    for run in (theirs, far):
        response = agent.post("utilization/", {"reports": [period(run, 1)]})
        assert response.status_code == 400
        assert list(response.json()["errors"]) == ["reports[0].run"]
    assert not UtilizationHour.objects.exists()


def test_user_tokens_are_refused(personas, agent):
    response = user_client(personas.org_admin).post(
        "/api/agent/utilization/", {"reports": []}, format="json"
    )
    assert response.status_code == 401


# --- The idle policy ------------------------------------------------------------------------


def url(cluster) -> str:
    return f"/api/clusters/{cluster.pk}/idle-policy/"


GOOD = {"enabled": True, "busy_below_percent": "10", "for_minutes": 45}


@pytest.mark.parametrize(
    ("persona", "get", "put"),
    [
        ("org_admin", 200, 200),
        ("program_manager", 200, 403),
        ("pi", 200, 403),
        ("researcher", 200, 403),
        ("finance", 200, 403),
        ("outsider", 404, 404),
    ],
)
def test_idle_policy_permission_matrix(personas, persona, get, put):
    client = user_client(getattr(personas, persona))
    response = client.get(url(personas.cluster))
    assert response.status_code == get
    if get == 200:
        assert response.json()["is_default"] is True
        assert response.json()["for_minutes"] == 30
    response = client.put(url(personas.cluster), GOOD, format="json")
    assert response.status_code == put
    assert IdlePolicy.objects.exists() == (put == 200)


def test_anonymous_and_other_organization(personas):
    assert APIClient().get(url(personas.cluster)).status_code in (401, 403)
    foreign = ClusterFactory(organization=OrganizationFactory(slug="far"), name="x", slug="x")
    admin = user_client(personas.org_admin)
    assert admin.get(url(foreign)).status_code == 404
    assert admin.put(url(foreign), GOOD, format="json").status_code == 404
    stranger = UserFactory()
    assert user_client(stranger).put(url(foreign), GOOD, format="json").status_code == 404


def test_org_admin_sets_the_policy(personas):
    admin = user_client(personas.org_admin)
    response = admin.put(url(personas.cluster), GOOD, format="json")
    assert response.status_code == 200
    assert response.json()["busy_below_percent"] == "10.00"
    assert response.json()["is_default"] is False
    policy = IdlePolicy.objects.get(cluster=personas.cluster)
    assert (policy.enabled, policy.busy_below_percent, policy.for_minutes) == (
        True,
        Decimal(10),
        45,
    )
    assert policy.updated_by == personas.org_admin
    assert admin.get(url(personas.cluster)).json()["for_minutes"] == 45
    from governance.choices import AuditAction
    from governance.models import AuditEvent

    [event] = AuditEvent.objects.filter(action=AuditAction.IDLE_POLICY_CHANGE)
    assert event.actor == personas.org_admin and event.object_id == personas.cluster.pk
    assert (event.before["busy_below_percent"], event.after["busy_below_percent"]) == (
        "5.00",
        "10.00",
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"busy_below_percent": "0"}, "busy_below_percent"),
        ({"busy_below_percent": "100.01"}, "busy_below_percent"),
        ({"busy_below_percent": "NaN"}, "busy_below_percent"),
        ({"for_minutes": 4}, "for_minutes"),
        ({"for_minutes": 1441}, "for_minutes"),
        ({"for_minutes": "x"}, "for_minutes"),
        ({"enabled": "maybe"}, "enabled"),
    ],
)
def test_idle_policy_validation_names_the_field(personas, change, field):
    admin = user_client(personas.org_admin)
    response = admin.put(url(personas.cluster), {**GOOD, **change}, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert not IdlePolicy.objects.exists()


def test_measured_floats_are_rounded_not_refused(personas, agent):
    run = started_run(submit(personas, personas.cluster), agent.node, minutes_ago=30)
    body = {"reports": [{**period(run, 1), "busy_gpu_seconds": 100.12345678}]}
    response = agent.post("utilization/", body)
    assert response.status_code == 201, response.json()
    total = sum(r.busy_gpu_seconds for r in UtilizationHour.objects.filter(run=run))
    assert total == Decimal("100.123457")
