"""The audit trail records every change — who, when, what, before/after — and nothing else.

One test per recorded change kind (share changes by split and by approval, each approval
decision, node drain/undrain/down/up by an operator and by the system, role changes; forced
preemption is in tests/scheduler/test_preempt_force.py), then refused changes that must
leave no event, then the append-only guarantees (the app and the database refuse edits).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.utils import timezone

from governance.models import AuditEvent, RoleAssignment
from governance.services.allocations import allocation_split
from governance.services.approvals import (
    approval_approve,
    approval_reject,
    approval_request_create,
    approval_withdraw,
    approvals_apply_due,
)
from governance.services.audit import audit_events_purge, audit_record
from governance.services.roles import role_grant, role_revoke
from scheduler.services.executor_reports import node_agent_create, node_heartbeat, node_register
from scheduler.services.nodes import (
    node_bring_up,
    node_drain,
    node_mark_down,
    node_undrain,
    nodes_expire_heartbeats,
)

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def only_event(**filters) -> AuditEvent:
    events = list(AuditEvent.objects.filter(**filters))
    assert len(events) == 1, f"expected one event for {filters}, got {events}"
    return events[0]


def pi_asks(p, percent: str, **kwargs):
    return approval_request_create(
        actor=p.pi,
        parent=p.program_a,
        cluster=p.cluster,
        percents={p.project_a1: Decimal(percent)},
        reason="Paper deadline.",
        **kwargs,
    )


def a_node(p, name="gpu-01", at=T0):
    agent, _token = node_agent_create(cluster=p.cluster, name=name)
    return node_register(agent=agent, gpus=8, now=at)


# --- Share changes ---------------------------------------------------------------------------


def test_split_records_each_childs_percent_before_and_after(personas):
    p = personas
    start = timezone.now()
    allocation_split(
        actor=p.program_manager,
        parent=p.program_a,
        cluster=p.cluster,
        percents={p.project_a1: Decimal("55"), p.project_a2: Decimal("25")},
        reason="Detection's deadline.",
    )
    event = only_event(action="share_change")
    assert event.actor == p.program_manager and event.actor_label == "program_manager"
    assert start <= event.at <= timezone.now()
    assert (event.organization, event.object_kind, event.object_id) == (
        p.organization,
        "program",
        p.program_a.pk,
    )
    assert event.object_label == "Vision on h100"
    assert event.before == {"Detection": "50.00", "Segmentation": "30.00"}
    assert {k: event.after[k] for k in ("Detection", "Segmentation")} == {
        "Detection": "55.00",
        "Segmentation": "25.00",
    }
    assert event.after["valid_to"] is None and event.after["valid_from"]
    assert event.reason == "Detection's deadline."


def test_split_of_programs_by_the_org_admin_is_recorded_on_the_organization(personas):
    p = personas
    allocation_split(
        actor=p.org_admin,
        parent=p.organization,
        cluster=p.cluster,
        percents={p.program_b: Decimal("35")},
        reason="Language needs less.",
    )
    event = only_event(action="share_change")
    assert (event.object_kind, event.object_id, event.actor) == (
        "organization",
        p.organization.pk,
        p.org_admin,
    )
    assert event.before == {"Language": "40.00"}
    assert event.after["Language"] == "35.00"


# --- Approval decisions ----------------------------------------------------------------------


def test_submitting_a_request_is_recorded_with_its_state_change(personas):
    p = personas
    request = pi_asks(p, "55")
    event = only_event(action="approval_submitted")
    assert (event.actor, event.object_kind, event.object_id) == (
        p.pi,
        "approval_request",
        request.pk,
    )
    assert event.before == {"state": "draft"} and event.after == {"state": "submitted"}
    assert event.object_label == f"Request #{request.pk} (Vision on h100)"
    assert event.organization == p.organization


def test_approving_records_the_decision_the_share_change_and_the_apply(personas):
    p = personas
    request = pi_asks(p, "55")
    approval_approve(actor=p.program_manager, approval_request=request, comment="Go ahead.")

    approved = only_event(action="approval_approved")
    assert approved.actor == p.program_manager and approved.reason == "Go ahead."
    assert approved.before == {"state": "submitted"} and approved.after == {"state": "approved"}

    share = only_event(action="share_change")
    assert share.actor == p.program_manager  # approving applied it at once
    assert share.before == {"Detection": "50.00"}
    assert share.after["Detection"] == "55.00"
    assert share.reason == f"Paper deadline. (request #{request.pk})"

    applied = only_event(action="approval_applied")
    assert applied.actor is None and applied.actor_label == ""  # the system's step
    assert applied.before == {"state": "approved"} and applied.after == {"state": "applied"}


def test_a_future_request_applied_by_the_beat_is_a_share_change_by_the_system(personas):
    p = personas
    effective = timezone.now() + timedelta(days=2)
    request = pi_asks(p, "60", effective_from=effective)
    approval_approve(actor=p.program_manager, approval_request=request)
    assert not AuditEvent.objects.filter(action="share_change").exists()  # not yet due

    assert approvals_apply_due(now=effective + timedelta(seconds=30)) == 1
    share = only_event(action="share_change")
    assert share.actor is None
    assert share.before == {"Detection": "50.00"} and share.after["Detection"] == "60.00"
    assert only_event(action="approval_applied").object_id == request.pk


def test_rejecting_is_recorded_with_the_comment(personas):
    p = personas
    request = pi_asks(p, "55")
    approval_reject(actor=p.program_manager, approval_request=request, comment="Not this month.")
    event = only_event(action="approval_rejected")
    assert (event.actor, event.reason) == (p.program_manager, "Not this month.")
    assert event.before == {"state": "submitted"} and event.after == {"state": "rejected"}


def test_withdrawing_is_recorded(personas):
    p = personas
    request = pi_asks(p, "55")
    approval_withdraw(actor=p.pi, approval_request=request, comment="Deadline moved.")
    event = only_event(action="approval_withdrawn")
    assert (event.actor, event.object_id, event.reason) == (p.pi, request.pk, "Deadline moved.")
    assert event.after == {"state": "withdrawn"}


# --- Nodes ---------------------------------------------------------------------------------


def test_drain_and_undrain_are_recorded_with_states_and_reason(personas):
    p = personas
    node = a_node(p)
    node_drain(node=node, actor=p.org_admin, reason="Fan failure.", now=T0)
    node_undrain(node=node, actor=p.org_admin, now=T0 + timedelta(hours=2))

    drain = only_event(action="node_drain")
    assert (drain.actor, drain.at, drain.object_kind, drain.object_id) == (
        p.org_admin,
        T0,
        "node",
        node.pk,
    )
    assert drain.object_label == "gpu-01 (h100)"
    assert drain.before == {"state": "healthy"} and drain.after == {"state": "draining"}
    assert drain.reason == "Fan failure."
    undrain = only_event(action="node_undrain")
    assert undrain.at == T0 + timedelta(hours=2)
    assert undrain.before == {"state": "draining"} and undrain.after == {"state": "healthy"}


def test_draining_twice_records_one_event(personas):
    p = personas
    node = a_node(p)
    node_drain(node=node, actor=p.org_admin, reason="Fan failure.", now=T0)
    node_drain(node=node, actor=p.org_admin, reason="Again.", now=T0 + timedelta(minutes=1))
    assert AuditEvent.objects.filter(action="node_drain").count() == 1


def test_mark_down_and_bring_up_are_recorded(personas):
    p = personas
    node = a_node(p)
    node_mark_down(node=node, actor=p.org_admin, reason="PSU replaced.", now=T0)
    node_bring_up(node=node, actor=p.org_admin, now=T0 + timedelta(hours=1))
    down = only_event(action="node_down")
    assert (down.actor, down.reason, down.at) == (p.org_admin, "PSU replaced.", T0)
    assert down.before == {"state": "healthy"} and down.after == {"state": "down"}
    up = only_event(action="node_up")
    assert up.before == {"state": "down"} and up.after == {"state": "healthy"}


def test_silent_agent_down_and_its_return_are_recorded_as_the_system(personas, settings):
    p = personas
    settings.SCHEDULER_AGENT_TIMEOUT_SECONDS = 60
    node = a_node(p, at=T0)
    nodes_expire_heartbeats(now=T0 + timedelta(minutes=5))
    down = only_event(action="node_down")
    assert down.actor is None and down.before == {"state": "healthy"}
    assert down.reason.startswith("No heartbeat since")

    node_heartbeat(node=node, now=T0 + timedelta(minutes=6))
    up = only_event(action="node_up")
    assert up.actor is None and up.after == {"state": "healthy"}
    assert up.at == T0 + timedelta(minutes=6)


# --- Roles ---------------------------------------------------------------------------------


def test_granting_and_revoking_a_role_are_recorded(personas):
    p = personas
    assignment = role_grant(
        actor=p.program_manager,
        user=p.outsider,
        role="researcher",
        scope=p.project_a2,
        reason="Joins Segmentation.",
    )
    granted = only_event(action="role_granted")
    assert (granted.actor, granted.object_kind, granted.object_id) == (
        p.program_manager,
        "user",
        p.outsider.pk,
    )
    assert granted.before == {}
    assert granted.after == {"role": "researcher", "scope": "project Segmentation (Vision)"}
    assert granted.reason == "Joins Segmentation."

    role_revoke(actor=p.org_admin, assignment=assignment, reason="Left.")
    revoked = only_event(action="role_revoked")
    assert revoked.actor == p.org_admin
    assert revoked.before == {"role": "researcher", "scope": "project Segmentation (Vision)"}
    assert revoked.after == {}
    assert not RoleAssignment.objects.filter(pk=assignment.pk).exists()


# --- Refused changes leave no event ----------------------------------------------------------


def test_a_split_past_100_percent_records_nothing(personas):
    p = personas
    with pytest.raises(ValidationError):
        allocation_split(
            actor=p.program_manager,
            parent=p.program_a,
            cluster=p.cluster,
            percents={p.project_a1: Decimal("75")},  # 75 + 30 > 100
            reason="Too much.",
        )
    with pytest.raises(ValidationError):
        allocation_split(
            actor=p.program_manager,
            parent=p.program_a,
            cluster=p.cluster,
            percents={p.project_a1: Decimal("-5")},
            reason="Bad input.",
        )
    assert not AuditEvent.objects.exists()


def test_refused_decisions_and_a_request_that_no_longer_fits_record_nothing(personas):
    p = personas
    request = pi_asks(p, "70")  # fits today: 70 + 30
    before = AuditEvent.objects.count()  # the submission's event
    with pytest.raises(ValidationError):
        approval_reject(actor=p.program_manager, approval_request=request, comment="  ")
    with pytest.raises(PermissionDenied):
        approval_approve(actor=p.researcher, approval_request=request)
    allocation_split(
        actor=p.program_manager,
        parent=p.program_a,
        cluster=p.cluster,
        percents={p.project_a2: Decimal("45")},
        reason="Segmentation grows.",
    )
    with pytest.raises(ValidationError):  # 70 + 45 > 100: the approval rolls back whole
        approval_approve(actor=p.program_manager, approval_request=request)
    assert AuditEvent.objects.count() == before + 1  # only the split
    assert not AuditEvent.objects.filter(action__in=["approval_approved", "approval_applied"])


def test_refused_node_and_role_changes_record_nothing(personas):
    p = personas
    node = a_node(p)
    node_mark_down(node=node, actor=p.org_admin, now=T0)
    events_before = AuditEvent.objects.count()
    with pytest.raises(ValidationError):
        node_drain(node=node, actor=p.org_admin, reason="Down already.", now=T0)
    with pytest.raises(ValidationError):  # already a researcher of Detection
        role_grant(actor=p.org_admin, user=p.researcher, role="researcher", scope=p.project_a1)
    with pytest.raises(ValidationError):  # a PI role is held on a project
        role_grant(actor=p.org_admin, user=p.outsider, role="pi", scope=p.program_a)
    with pytest.raises(PermissionDenied):  # a PI does not manage roles
        role_grant(actor=p.pi, user=p.outsider, role="researcher", scope=p.project_a1)
    with pytest.raises(PermissionDenied):  # a program manager does not make org admins
        role_grant(actor=p.program_manager, user=p.outsider, role="org_admin", scope=p.organization)
    last_admin = RoleAssignment.objects.get(user=p.org_admin, role="org_admin")
    with pytest.raises(ValidationError):  # nobody could manage the organization afterwards
        role_revoke(actor=p.org_admin, assignment=last_admin)
    assert AuditEvent.objects.count() == events_before
    assert RoleAssignment.objects.filter(pk=last_admin.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_an_event_is_only_written_inside_the_changes_transaction(personas):
    p = personas
    with pytest.raises(RuntimeError):
        audit_record(
            action="share_change",
            organization_id=p.organization.pk,
            actor=None,
            object_kind="organization",
            object_id=p.organization.pk,
            object_label="outside any transaction",
        )
    assert not AuditEvent.objects.exists()


# --- Append-only -----------------------------------------------------------------------------


def test_events_cannot_be_edited_or_deleted_by_the_app_or_in_the_database(personas):
    p = personas
    allocation_split(
        actor=p.program_manager,
        parent=p.program_a,
        cluster=p.cluster,
        percents={p.project_a1: Decimal("55")},
        reason="Deadline.",
    )
    event = AuditEvent.objects.get()
    event.reason = "Rewritten."
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        event.delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.filter(pk=event.pk).update(reason="Rewritten.")
    with pytest.raises(TypeError):
        AuditEvent.objects.all().delete()
    for sql in (
        "UPDATE governance_auditevent SET reason = 'Rewritten.'",
        "DELETE FROM governance_auditevent",
    ):
        with (
            pytest.raises(Exception, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql)
    assert AuditEvent.objects.get(pk=event.pk).reason == "Deadline."


def test_deleting_the_organization_purges_its_events_only(personas):
    from tests.factories import OrganizationFactory

    p = personas
    other = OrganizationFactory(name="Elsewhere", slug="elsewhere")
    for org in (p.organization, other):
        audit_record(
            action="share_change",
            organization_id=org.pk,
            actor=None,
            object_kind="organization",
            object_id=org.pk,
            object_label=str(org),
        )
    assert audit_events_purge(organization=p.organization) == 1
    assert list(AuditEvent.objects.values_list("organization_id", flat=True)) == [other.pk]
    # The purge's setting ended with it: a plain delete is refused again.
    with (
        pytest.raises(Exception, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM governance_auditevent")
