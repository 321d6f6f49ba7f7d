"""A preempted workload's history names the workload that preempted it only to readers who may
see that workload's project; the engine's explanation reads "another project" for the others.
Before, the page, the API and the requeue reason named the other project (its key, and the
preemptor's name and link) to anyone who saw the preempted workload."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler.choices import RunEndReason
from scheduler.models import Node
from scheduler.services.runs import run_end
from tests.personas import build_personas
from tests.scheduler.agent_api import started_run
from tests.scheduler.test_api_workloads import make_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def preempted(db):
    p = build_personas()
    node = Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    victim = make_workload(p.project_a1, p.cluster, p.researcher, name="train", gpus=2,
                           min_runtime_seconds=3600)  # fmt: skip
    preemptor = make_workload(p.project_b1, p.cluster, None, name="secret-llm-run", gpus=2,
                              min_runtime_seconds=3600)  # fmt: skip
    run = started_run(victim, node, by=preemptor)
    key = f"{p.program_b.slug}/{p.project_b1.slug}"
    run.stop_explanation = (
        f"preempted by {preemptor.pk} ({key}): project {key} is below its entitlement "
        "(2 of 8 GPUs) and reclaims from vision/detection, which runs above its own (10 of 8)"
    )
    run.save()
    run_end(run=run, reason=RunEndReason.PREEMPTED)
    return p, victim, preemptor, key


def page_as(user, workload) -> str:
    client = Client()
    client.force_login(user)
    return client.get(f"/workloads/{workload.pk}/").content.decode()


def api_as(user, workload) -> dict:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client.get(f"/api/workloads/{workload.pk}/").json()


def test_a_reader_who_may_not_see_the_preemptor_gets_another_project(preempted):
    p, victim, preemptor, key = preempted
    page = page_as(p.researcher, victim)
    assert "by another project's workload" in page
    assert "another project is below its entitlement" in page
    assert key not in page and "secret-llm-run" not in page
    assert f"/workloads/{preemptor.pk}/" not in page
    (run,) = api_as(p.researcher, victim)["runs"]
    assert run["preempted_by"] is None
    assert key not in run["stop_explanation"]
    assert run["stop_explanation"].startswith(f"preempted by {preemptor.pk} (another project)")
    # The requeue reason every reader of the workload sees names no other project either.
    victim.refresh_from_db()
    assert key not in victim.reason and "another project" in victim.reason


def test_a_reader_who_sees_both_projects_gets_the_names(preempted):
    p, victim, preemptor, key = preempted
    page = page_as(p.org_admin, victim)
    assert "secret-llm-run" in page and f"/workloads/{preemptor.pk}/" in page
    assert key in page
    (run,) = api_as(p.org_admin, victim)["runs"]
    assert run["preempted_by"] == preemptor.pk
    assert key in run["stop_explanation"]
