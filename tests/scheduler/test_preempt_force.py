"""Forced preemption: an operator stops a running workload inside its minimum runtime.

The run gets stop orders at once (the engine would protect it for its minimum runtime), the
workload is requeued with its submit time when the agent confirms, and the act is in the
audit trail with the operator's reason. Only org admins of the cluster's organization may;
a reason is required; a workload that is not running is refused; a refusal changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import AuditEvent
from scheduler.choices import OrderKind, OrderState, RunEndReason, WorkloadState
from scheduler.models import Order, Run, Workload
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.executor_reports import order_acknowledge
from scheduler.services.preemptions import workload_preempt_force
from scheduler.services.workloads import workload_submit
from tests.factories import UserFactory, org_admin_of, researcher_of
from tests.scheduler.conftest import build_world

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)


@pytest.fixture
def running():
    """A one-hour-protected 8-GPU workload started at T0, an operator and a researcher."""
    world = build_world(nodes=2)
    operator = UserFactory(username="operator")
    org_admin_of(world.cluster.organization, operator)
    member = UserFactory(username="member")
    researcher_of(world.projects["budgeted"], member)
    workload = workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name="long-training",
        gpus=8, min_runtime_seconds=3600, launch_spec={"command": ["true"]}, now=T0,
        submitted_by=member,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    workload.refresh_from_db()
    assert workload.state == WorkloadState.RUNNING
    return world, operator, member, workload


def test_operator_stops_a_protected_run_now_and_it_is_requeued_on_the_ack(running):
    world, operator, _member, workload = running
    run = workload_preempt_force(
        workload=workload, actor=operator, reason="Runaway job filling /scratch.", now=T0 + 60 * SEC
    )
    workload.refresh_from_db()
    assert workload.state == WorkloadState.PREEMPTED
    assert run.stop_requested_at == T0 + 60 * SEC  # 59 min before its protection ends
    assert run.stop_reason == RunEndReason.PREEMPTED
    assert run.stop_explanation == "forced by operator: Runaway job filling /scratch."
    stop = Order.objects.get(run=run, kind=OrderKind.STOP)

    # The next cycle neither restarts nor re-stops it while the agent has not confirmed.
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 70 * SEC)
    assert Order.objects.filter(run=run, kind=OrderKind.STOP).count() == 1

    order_acknowledge(order=stop, now=T0 + 75 * SEC)
    run.refresh_from_db()
    workload.refresh_from_db()
    assert (run.ended_at, run.end_reason) == (T0 + 75 * SEC, RunEndReason.PREEMPTED)
    assert workload.state == WorkloadState.PENDING
    assert workload.submitted_at == T0  # requeued with its submit time kept
    assert "forced by operator" in workload.reason

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 80 * SEC)
    assert Run.objects.filter(workload=workload).count() == 2  # it runs again


def test_forced_preemption_is_in_the_audit_trail(running):
    world, operator, _member, workload = running
    run = workload_preempt_force(
        workload=workload, actor=operator, reason="Urgent repair.", now=T0 + 60 * SEC
    )
    event = AuditEvent.objects.get(action="run_preempt_forced")
    assert (event.actor, event.at, event.organization) == (
        operator,
        T0 + 60 * SEC,
        world.cluster.organization,
    )
    assert (event.object_kind, event.object_id, event.object_label) == (
        "workload",
        workload.pk,
        "long-training (run 1)",
    )
    assert event.before == {
        "state": "running",
        "run": run.pk,
        "protected_until": "2026-03-02T11:00:00+00:00",
    }
    assert event.after == {
        "state": "preempted",
        "stop_requested_at": "2026-03-02T10:01:00+00:00",
    }
    assert event.reason == "Urgent repair."


def test_refusals_change_nothing(running):
    world, operator, member, workload = running
    with pytest.raises(PermissionDenied):  # the submitter is not an operator
        workload_preempt_force(workload=workload, actor=member, reason="Mine.", now=T0)
    with pytest.raises(ValidationError) as missing:
        workload_preempt_force(workload=workload, actor=operator, reason="  ", now=T0)
    assert "reason" in missing.value.message_dict
    with pytest.raises(ValidationError) as long:
        workload_preempt_force(workload=workload, actor=operator, reason="x" * 501, now=T0)
    assert "reason" in long.value.message_dict
    pending = workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name="waiting", gpus=8,
        min_runtime_seconds=0, launch_spec={"command": ["true"]}, now=T0,
    )  # fmt: skip
    with pytest.raises(ValidationError) as not_running:
        workload_preempt_force(workload=pending, actor=operator, reason="Stop.", now=T0)
    assert "state" in not_running.value.message_dict

    workload.refresh_from_db()
    assert workload.state == WorkloadState.RUNNING
    assert not Order.objects.filter(kind=OrderKind.STOP).exists()
    assert not AuditEvent.objects.exists()


def test_a_run_already_stopping_is_refused(running):
    _world, operator, _member, workload = running
    workload_preempt_force(workload=workload, actor=operator, reason="First.", now=T0 + SEC)
    with pytest.raises(ValidationError) as again:
        workload_preempt_force(workload=workload, actor=operator, reason="Again.", now=T0 + SEC)
    assert "state" in again.value.message_dict
    assert AuditEvent.objects.count() == 1


def test_api_preempt_by_operator_and_refusals(running):
    _world, operator, member, workload = running
    url = reverse("api:workload-preempt", kwargs={"pk": workload.pk})
    client = APIClient()
    client.force_login(member)
    assert client.post(url, {"reason": "Mine."}, format="json").status_code == 403
    client.force_login(operator)
    refused = client.post(url, {}, format="json")
    assert refused.status_code == 400 and "reason" in refused.json()["errors"]
    assert Workload.objects.get(pk=workload.pk).state == WorkloadState.RUNNING

    done = client.post(url, {"reason": "Urgent repair."}, format="json")
    assert done.status_code == 200
    assert done.json()["state"] == "preempted"
    assert done.json()["runs"][0]["stop_explanation"] == "forced by operator: Urgent repair."
    again = client.post(url, {"reason": "Again."}, format="json")
    assert again.status_code == 400 and "state" in again.json()["errors"]
    outsider = UserFactory(username="stranger")
    client.force_login(outsider)
    assert client.post(url, {"reason": "x"}, format="json").status_code == 404


def test_page_button_shown_to_operators_and_needs_confirmation(client, running):
    _world, operator, member, workload = running
    page = reverse("scheduler:workload-detail", kwargs={"pk": workload.pk})
    action = reverse("scheduler:workload-preempt", kwargs={"pk": workload.pk})
    client.force_login(member)
    assert action not in client.get(page).content.decode()
    assert client.post(action, {"reason": "x", "confirm": "yes"}).status_code == 403

    client.force_login(operator)
    html = client.get(page).content.decode()
    assert action in html and "csrfmiddlewaretoken" in html and "Preempt now" in html

    unconfirmed = client.post(action, {"reason": "Urgent repair."}, follow=True)
    assert "Tick the confirmation" in unconfirmed.content.decode()
    assert Workload.objects.get(pk=workload.pk).state == WorkloadState.RUNNING

    done = client.post(action, {"reason": "Urgent repair.", "confirm": "yes"}, follow=True)
    assert "is being stopped" in done.content.decode()
    assert Workload.objects.get(pk=workload.pk).state == WorkloadState.PREEMPTED
    assert Order.objects.get(kind=OrderKind.STOP).state == OrderState.CREATED
    assert AuditEvent.objects.get().reason == "Urgent repair."
