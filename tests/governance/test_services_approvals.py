"""The approval state machine: who may do what, applying at the effective date, history."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from governance.choices import ApprovalState, DecisionAction
from governance.models import Allocation, ApprovalDecision, ApprovalRequest
from governance.selectors.tree import share_at
from governance.services.allocations import allocation_split
from governance.services.approvals import (
    approval_apply,
    approval_approve,
    approval_reject,
    approval_request_create,
    approval_submit,
    approval_withdraw,
    approvals_apply_due,
)
from tests.factories import AllocationFactory

pytestmark = pytest.mark.django_db


def pi_asks(personas, percent="60", **kwargs):
    """The PI of Detection (50 % of Vision; Vision has 20 % free) asks for ``percent``."""
    return approval_request_create(
        actor=kwargs.pop("actor", personas.pi),
        parent=kwargs.pop("parent", personas.program_a),
        cluster=personas.cluster,
        percents=kwargs.pop("percents", {personas.project_a1: Decimal(percent)}),
        reason=kwargs.pop("reason", "Paper deadline."),
        **kwargs,
    )


def state_of_everything() -> tuple:
    return (
        list(ApprovalRequest.objects.order_by("id").values_list("id", "state")),
        ApprovalDecision.objects.count(),
        Allocation.objects.count(),
    )


def actions(request) -> list[str]:
    return list(request.decisions.order_by("at", "id").values_list("action", flat=True))


def test_pi_request_is_submitted_with_lines_recording_the_previous_share(personas):
    request = pi_asks(personas)
    assert request.state == ApprovalState.SUBMITTED
    line = request.lines.get()
    assert (line.project, line.percent, line.previous_percent) == (
        personas.project_a1,
        Decimal("60.00"),
        Decimal("50.00"),
    )
    assert actions(request) == [DecisionAction.CREATE, DecisionAction.SUBMIT]
    assert request.parent == personas.program_a


def test_program_manager_approves_and_the_change_applies_now(personas):
    request = pi_asks(personas)
    approval_approve(actor=personas.program_manager, approval_request=request, comment="OK")
    request.refresh_from_db()
    assert request.state == ApprovalState.APPLIED
    assert actions(request) == ["create", "submit", "approve", "apply"]
    allocation = Allocation.objects.get(approval_request=request)
    assert (allocation.percent, allocation.set_by) == (Decimal("60.00"), personas.program_manager)
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("60.00")
    decision = request.decisions.get(action=DecisionAction.APPROVE)
    assert (decision.actor, decision.from_state, decision.to_state, decision.comment) == (
        personas.program_manager,
        ApprovalState.SUBMITTED,
        ApprovalState.APPROVED,
        "OK",
    )
    assert request.decisions.get(action=DecisionAction.APPLY).actor is None


def test_org_admin_may_decide_anything_in_the_organization(personas):
    request = pi_asks(personas)
    approval_approve(actor=personas.org_admin, approval_request=request)
    request.refresh_from_db()
    assert request.state == ApprovalState.APPLIED


@pytest.mark.parametrize("persona", ["pi", "researcher", "finance", "outsider"])
def test_only_a_manager_of_the_parent_decides(personas, persona):
    request = pi_asks(personas)
    before = state_of_everything()
    with pytest.raises(PermissionDenied):
        approval_approve(actor=personas.users[persona], approval_request=request)
    with pytest.raises(PermissionDenied):
        approval_reject(actor=personas.users[persona], approval_request=request, comment="no")
    assert state_of_everything() == before


def test_nobody_approves_their_own_request(personas):
    request = pi_asks(personas, actor=personas.program_manager)
    before = state_of_everything()
    with pytest.raises(PermissionDenied, match="your own request"):
        approval_approve(actor=personas.program_manager, approval_request=request)
    assert state_of_everything() == before
    # The org admin, a manager above, may.
    approval_approve(actor=personas.org_admin, approval_request=request)


def test_program_level_request_is_decided_by_the_org_admin_not_the_program_manager(personas):
    request = approval_request_create(
        actor=personas.program_manager,
        parent=personas.organization,
        cluster=personas.cluster,
        percents={personas.program_a: Decimal("55")},
        reason="Vision needs less this month.",
    )
    with pytest.raises(PermissionDenied):
        approval_approve(actor=personas.program_manager, approval_request=request)
    approval_approve(actor=personas.org_admin, approval_request=request)
    assert share_at(node=personas.program_a, cluster=personas.cluster) == Decimal("55.00")


@pytest.mark.parametrize("persona", ["researcher", "finance", "outsider"])
def test_readers_cannot_request_changes(personas, persona):
    before = state_of_everything()
    with pytest.raises(PermissionDenied):
        pi_asks(personas, actor=personas.users[persona])
    assert state_of_everything() == before


def test_pi_cannot_request_a_change_of_a_sibling_project(personas):
    with pytest.raises(PermissionDenied):
        pi_asks(personas, percents={personas.project_a2: Decimal("10")})


def test_a_decided_request_cannot_be_decided_again(personas):
    approved = pi_asks(personas)
    approval_approve(actor=personas.program_manager, approval_request=approved)
    rejected = pi_asks(personas, "65")
    approval_reject(actor=personas.program_manager, approval_request=rejected, comment="Not now.")
    for request in (approved, rejected):
        before = state_of_everything()
        with pytest.raises(ValidationError) as info:
            approval_approve(actor=personas.org_admin, approval_request=request)
        assert "state" in info.value.message_dict
        with pytest.raises(ValidationError):
            approval_reject(actor=personas.org_admin, approval_request=request, comment="x")
        assert state_of_everything() == before


def test_approving_a_stale_copy_of_a_decided_request_is_refused(personas):
    request = pi_asks(personas)
    stale = ApprovalRequest.objects.get(pk=request.pk)
    approval_reject(actor=personas.program_manager, approval_request=request, comment="No.")
    # The object in hand still says "submitted"; the service re-reads it under lock.
    assert stale.state == ApprovalState.SUBMITTED
    with pytest.raises(ValidationError):
        approval_approve(actor=personas.org_admin, approval_request=stale)
    assert not Allocation.objects.filter(approval_request=request).exists()


def test_reject_needs_a_comment_and_keeps_it(personas):
    request = pi_asks(personas)
    with pytest.raises(ValidationError) as info:
        approval_reject(actor=personas.program_manager, approval_request=request, comment=" ")
    assert "comment" in info.value.message_dict
    approval_reject(
        actor=personas.program_manager, approval_request=request, comment="Segmentation first."
    )
    request.refresh_from_db()
    assert request.state == ApprovalState.REJECTED
    assert request.decisions.get(action="reject").comment == "Segmentation first."


def test_approval_that_would_push_siblings_past_100_is_refused(personas):
    request = pi_asks(personas, "75")  # 75 + 30 = 105
    before = state_of_everything()
    with pytest.raises(ValidationError) as info:
        approval_approve(actor=personas.program_manager, approval_request=request)
    assert "105.00 %" in info.value.message_dict["shares"][0]
    assert state_of_everything() == before
    # The manager makes room first; then the same request fits.
    allocation_split(
        actor=personas.program_manager,
        parent=personas.program_a,
        cluster=personas.cluster,
        percents={personas.project_a2: Decimal("25")},
        reason="Room for Detection.",
    )
    approval_approve(actor=personas.program_manager, approval_request=request)


def test_requester_withdraws_a_submitted_request_and_others_cannot(personas):
    request = pi_asks(personas)
    with pytest.raises(PermissionDenied):
        approval_withdraw(actor=personas.program_manager, approval_request=request)
    approval_withdraw(actor=personas.pi, approval_request=request, comment="Deadline moved.")
    request.refresh_from_db()
    assert request.state == ApprovalState.WITHDRAWN
    with pytest.raises(ValidationError):
        approval_approve(actor=personas.program_manager, approval_request=request)


def test_draft_is_submitted_by_its_requester_only(personas):
    draft = pi_asks(personas, submit=False)
    assert draft.state == ApprovalState.DRAFT
    with pytest.raises(ValidationError):
        approval_approve(actor=personas.program_manager, approval_request=draft)
    with pytest.raises(PermissionDenied):
        approval_submit(actor=personas.program_manager, approval_request=draft)
    approval_submit(actor=personas.pi, approval_request=draft)
    draft.refresh_from_db()
    assert draft.state == ApprovalState.SUBMITTED
    with pytest.raises(ValidationError):
        approval_submit(actor=personas.pi, approval_request=draft)


def test_request_input_is_validated_like_a_split(personas):
    now = timezone.now()
    before = state_of_everything()
    cases = [
        ({"percents": {personas.project_a1: "150"}}, "percent"),
        ({"percents": {personas.project_a1: "many"}}, "percent"),
        ({"effective_from": now + timedelta(days=2), "effective_to": now}, "effective_to"),
        ({"effective_from": now - timedelta(days=3)}, "effective_from"),
        ({"percents": {personas.project_b1: "10"}, "actor": personas.org_admin}, "percents"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationError) as info:
            pi_asks(personas, **kwargs)
        assert field in info.value.message_dict, (kwargs, info.value.message_dict)
    assert state_of_everything() == before


def test_future_request_stays_approved_until_due_then_applies_at_its_date(personas):
    start = timezone.now() + timedelta(days=2)
    request = pi_asks(personas, "70", effective_from=start, effective_to=start + timedelta(days=5))
    approval_approve(actor=personas.program_manager, approval_request=request)
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED
    assert approvals_apply_due() == 0
    assert not Allocation.objects.filter(approval_request=request).exists()

    assert approvals_apply_due(now=start + timedelta(seconds=30)) == 1
    request.refresh_from_db()
    assert request.state == ApprovalState.APPLIED
    allocation = Allocation.objects.get(approval_request=request)
    assert (allocation.valid_from, allocation.valid_to) == (start, start + timedelta(days=5))
    assert allocation.set_by == personas.program_manager
    at = personas.cluster
    assert share_at(node=personas.project_a1, cluster=at, at=start) == Decimal("70.00")
    assert share_at(node=personas.project_a1, cluster=at, at=start + timedelta(days=5)) == 50
    # Running again changes nothing.
    assert approvals_apply_due(now=start + timedelta(minutes=1)) == 0
    assert Allocation.objects.filter(approval_request=request).count() == 1


def test_approved_future_request_holds_its_place_against_later_splits(personas):
    start = timezone.now() + timedelta(days=2)
    request = pi_asks(personas, "70", effective_from=start)
    approval_approve(actor=personas.program_manager, approval_request=request)
    # Segmentation to 35 % would fit today (50 + 35) but not once Detection's 70 % applies.
    with pytest.raises(ValidationError):
        allocation_split(
            actor=personas.program_manager,
            parent=personas.program_a,
            cluster=personas.cluster,
            percents={personas.project_a2: Decimal("35")},
            reason="More for segmentation.",
        )


def test_apply_that_no_longer_fits_records_apply_failed_once_and_stays_approved(personas):
    start = timezone.now() + timedelta(days=1)
    request = pi_asks(personas, "70", effective_from=start)
    approval_approve(actor=personas.program_manager, approval_request=request)
    # A row written behind the services' back (e.g. a data repair) takes the room.
    AllocationFactory(
        cluster=personas.cluster,
        program=None,
        project=personas.project_a2,
        percent=Decimal("45"),
        valid_from=start - timedelta(hours=1),
        set_by=personas.org_admin,
    )
    due = start + timedelta(minutes=1)
    assert approvals_apply_due(now=due) == 0
    assert approvals_apply_due(now=due + timedelta(minutes=1)) == 0
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED
    failed = request.decisions.filter(action=DecisionAction.APPLY_FAILED)
    assert failed.count() == 1
    assert "115.00 %" in failed.get().comment
    assert not Allocation.objects.filter(approval_request=request).exists()


def test_apply_ignores_requests_that_are_not_approved(personas):
    request = pi_asks(personas)
    result = approval_apply(approval_request=request)
    assert result.state == ApprovalState.SUBMITTED
    assert not Allocation.objects.filter(approval_request=request).exists()
