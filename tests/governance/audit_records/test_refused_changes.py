"""Refused changes leave no event; an event is only written inside its change's transaction."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from governance.models import AuditEvent, RoleAssignment
from governance.services.allocations import allocation_split
from governance.services.approvals import (
    approval_approve,
    approval_reject,
)
from governance.services.audit import audit_record
from governance.services.roles import role_grant, role_revoke
from scheduler.services.nodes import (
    node_drain,
    node_mark_down,
)
from tests.governance.audit_records.helpers import T0, a_node, pi_asks

pytestmark = pytest.mark.django_db


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
