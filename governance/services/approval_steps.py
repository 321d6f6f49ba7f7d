"""The steps every approval transition is made of (``governance.services.approvals``): re-read
the request under its row lock, check who may act, record a decision (history, audit trail,
notices), and append an approved request's allocation rows."""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from governance.choices import ApprovalState, AuditAction, DecisionAction
from governance.models import Allocation, ApprovalDecision, ApprovalRequest
from governance.selectors.tree import share_at
from governance.selectors.visibility import user_visibility
from governance.services.approval_notices import approval_notify
from governance.services.audit import audit_record, audit_share_change
from governance.services.notifications import share_change_notify

# Decision → audit action (creating a draft changes nothing yet; a failed apply neither).
AUDITED_DECISIONS = {
    DecisionAction.SUBMIT: AuditAction.APPROVAL_SUBMITTED,
    DecisionAction.APPROVE: AuditAction.APPROVAL_APPROVED,
    DecisionAction.REJECT: AuditAction.APPROVAL_REJECTED,
    DecisionAction.WITHDRAW: AuditAction.APPROVAL_WITHDRAWN,
    DecisionAction.APPLY: AuditAction.APPROVAL_APPLIED,
}


def decision_record(
    approval_request: ApprovalRequest,
    actor,
    action: DecisionAction,
    to_state: ApprovalState,
    from_state: str,
    comment: str,
    now: datetime,
) -> None:
    """Move the request to ``to_state`` at ``now`` and append the decision (caller holds the
    row lock).

    Decisions that change the request's state (not its creation as a draft) also go to the
    audit trail, in the same transaction.
    """
    approval_request.state = to_state
    approval_request.updated_at = now
    approval_request.save(update_fields=["state", "updated_at"])
    ApprovalDecision.objects.create(
        request=approval_request,
        actor=actor,
        action=action,
        from_state=from_state,
        to_state=to_state,
        comment=comment or "",
        at=now,
    )
    approval_notify(approval_request, action, actor, comment, now)
    if action in AUDITED_DECISIONS:
        audit_record(
            action=AUDITED_DECISIONS[action],
            organization_id=approval_request.organization_id,
            actor=actor,
            object_kind="approval_request",
            object_id=approval_request.pk,
            object_label=(
                f"Request #{approval_request.pk} ({approval_request.parent} "
                f"on {approval_request.cluster.name})"
            ),
            before={"state": from_state} if from_state else {},
            after={"state": to_state},
            reason=comment,
            at=now,
        )


def request_locked(
    approval_request: ApprovalRequest, *, expected: tuple[str, ...]
) -> ApprovalRequest:
    """Re-read the request under a row lock; refuse on ``state`` unless it is in ``expected``.

    Reading again inside the lock is what makes "a decided request cannot be decided again"
    hold when two people click at the same moment.
    """
    fresh = ApprovalRequest.objects.select_for_update().get(pk=approval_request.pk)
    if fresh.state not in expected:
        raise ValidationError(
            {
                "state": [
                    f"Request #{fresh.pk} is {fresh.get_state_display().lower()}; it cannot be changed now."
                ]
            }
        )
    return fresh


def require_requester(actor, approval_request: ApprovalRequest, verb: str) -> None:
    """Refuse (``PermissionDenied``) anyone but the person who made the request."""
    if actor is None or approval_request.requested_by_id != actor.pk:
        raise PermissionDenied(f"Only the requester may {verb} this request.")


def require_decider(actor, approval_request: ApprovalRequest, verb: str) -> None:
    """Refuse (``PermissionDenied``) the requester and anyone who does not manage the parent."""
    if actor is not None and approval_request.requested_by_id == actor.pk:
        raise PermissionDenied(f"You cannot {verb} your own request.")
    if not user_visibility(user=actor).can_decide(approval_request):
        raise PermissionDenied(
            f"Only a manager of {approval_request.parent} may {verb} this request."
        )


def request_apply_locked(
    approval_request: ApprovalRequest, *, valid_from: datetime, set_by, now: datetime, actor=None
) -> None:
    """Append the request's allocation rows at ``now`` and mark it applied (caller holds both
    locks).

    The share change goes to the audit trail with ``actor`` (the approver when approving
    applies at once; ``None``, the system, when the beat applies it at its date).
    """
    lines = list(approval_request.lines.select_related("program__organization", "project"))
    cluster = approval_request.cluster
    before = {line.node: share_at(node=line.node, cluster=cluster, at=valid_from) for line in lines}
    reason = f"{approval_request.reason} (request #{approval_request.pk})"
    for line in lines:
        Allocation.objects.create(
            cluster=approval_request.cluster,
            program=line.program,
            project=line.project,
            percent=line.percent,
            valid_from=valid_from,
            valid_to=approval_request.effective_to,
            set_by=set_by,
            reason=reason,
            approval_request=approval_request,
            created_at=now,
        )
    # The same change goes to the audit trail and to the people it concerns.
    change = {
        "cluster": cluster,
        "before": before,
        "after": {line.node: line.percent for line in lines},
        "valid_from": valid_from,
        "valid_to": approval_request.effective_to,
        "reason": reason,
    }
    audit_share_change(actor=actor, parent=approval_request.parent, at=now, **change)
    share_change_notify(actor=actor, now=now, requester=approval_request.requested_by, **change)
    decision_record(
        approval_request,
        None,
        DecisionAction.APPLY,
        ApprovalState.APPLIED,
        ApprovalState.APPROVED,
        f"Applied from {timezone.localtime(valid_from):%Y-%m-%d %H:%M %Z}.",
        now,
    )


def apply_failed_record(approval_request: ApprovalRequest, reason: str, now: datetime) -> None:
    """Note on an approved request why it could not be applied, and tell its requester."""
    # The beat retries every minute; one note per distinct reason keeps the history readable.
    last = approval_request.decisions.order_by("-at", "-id").first()
    if last and last.action == DecisionAction.APPLY_FAILED and last.comment == reason:
        return
    ApprovalDecision.objects.create(
        request=approval_request,
        actor=None,
        action=DecisionAction.APPLY_FAILED,
        from_state=ApprovalState.APPROVED,
        to_state=ApprovalState.APPROVED,
        comment=reason,
        at=now,
    )
    approval_notify(approval_request, DecisionAction.APPLY_FAILED, None, reason, now)
