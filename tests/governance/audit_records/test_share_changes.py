"""Share changes (by split and by approval) and each approval decision are recorded."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from governance.models import AuditEvent
from governance.services.allocations import allocation_split
from governance.services.approvals import (
    approval_approve,
    approval_reject,
    approval_withdraw,
    approvals_apply_due,
)
from tests.governance.audit_records.helpers import only_event, pi_asks

pytestmark = pytest.mark.django_db


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
