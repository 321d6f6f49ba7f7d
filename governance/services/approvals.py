"""The approval state machine for changes of shares.

draft → submitted → approved → applied, or submitted → rejected, or draft/submitted →
withdrawn. The requester creates, submits and withdraws; a manager of the parent node (program
manager for the projects of their program, org admin for anything in the organization)
approves or rejects; nobody decides their own request; a decided request is never decided
again. Applying is a system step at the effective date. Every transition appends an
``ApprovalDecision``; nothing is edited or deleted.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from governance.choices import ApprovalState, AuditAction, DecisionAction, NotificationKind
from governance.models import (
    Allocation,
    ApprovalDecision,
    ApprovalLine,
    ApprovalRequest,
    Cluster,
    Organization,
    Program,
    Project,
)
from governance.selectors.splits import request_rows
from governance.selectors.tree import share_at
from governance.selectors.visibility import user_visibility
from governance.services.audit import audit_record, audit_share_change
from governance.services.notifications import (
    Notice,
    notifications_settle,
    notify,
    request_deciders,
    share_change_notify,
)
from governance.services.shares import (
    PAST_GRACE,
    check_siblings_fit,
    lock_parent,
    validate_change,
)


def approval_request_create(
    *,
    actor,
    parent: Organization | Program,
    cluster: Cluster,
    percents: dict[Program | Project, Decimal],
    reason: str,
    effective_from: datetime | None = None,
    effective_to: datetime | None = None,
    submit: bool = True,
    now: datetime | None = None,
) -> ApprovalRequest:
    """Create a request to change shares of ``parent``'s children, submitted unless ``submit=False``.

    The actor must be allowed to request a change of every named child (its PI, or a manager
    of it or above), else ``PermissionDenied``. Input is validated like a direct split
    (``ValidationError`` naming ``percent``, ``percents``, ``cluster``, ``reason``,
    ``effective_from`` or ``effective_to``); whether the change fits in 100 % is checked when a
    manager approves it — a PI may ask for more than is free today. Each line records the
    child's share at ``effective_from`` as ``previous_percent``. ``now``: the moment of the
    request (default: the current time; loading a history passes past moments).
    """
    now = now or timezone.now()
    vis = user_visibility(user=actor)
    if not (vis.can_manage(parent) or any(vis.can_request(n) for n in percents or {})):
        raise PermissionDenied(f"You may not request changes of shares in {parent}.")
    items, start, end = validate_change(
        parent=parent,
        cluster=cluster,
        percents=percents,
        reason=reason,
        start=effective_from,
        end=effective_to,
        now=now,
        start_field="effective_from",
        end_field="effective_to",
    )
    refused = [str(node) for node, _ in items if not vis.can_request(node)]
    if refused:
        raise PermissionDenied(f"You may not request a change of {', '.join(refused)}.")
    with transaction.atomic():
        approval_request = ApprovalRequest.objects.create(
            organization_id=parent.pk
            if isinstance(parent, Organization)
            else parent.organization_id,
            program=parent if isinstance(parent, Program) else None,
            cluster=cluster,
            requested_by=actor,
            reason=reason.strip(),
            effective_from=start,
            effective_to=end,
            state=ApprovalState.DRAFT,
            created_at=now,
            updated_at=now,
        )
        for node, percent in items:
            ApprovalLine.objects.create(
                request=approval_request,
                program=node if isinstance(node, Program) else None,
                project=node if isinstance(node, Project) else None,
                percent=percent,
                previous_percent=share_at(node=node, cluster=cluster, at=start),
            )
        _decide(approval_request, actor, DecisionAction.CREATE, ApprovalState.DRAFT, "", "", now)
        if submit:
            _decide(
                approval_request,
                actor,
                DecisionAction.SUBMIT,
                ApprovalState.SUBMITTED,
                ApprovalState.DRAFT,
                "",
                now,
            )
    return approval_request


def _decide(
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
    _tell(approval_request, action, actor, comment, now)
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


# Decision → audit action (creating a draft changes nothing yet; a failed apply neither).
AUDITED_DECISIONS = {
    DecisionAction.SUBMIT: AuditAction.APPROVAL_SUBMITTED,
    DecisionAction.APPROVE: AuditAction.APPROVAL_APPROVED,
    DecisionAction.REJECT: AuditAction.APPROVAL_REJECTED,
    DecisionAction.WITHDRAW: AuditAction.APPROVAL_WITHDRAWN,
    DecisionAction.APPLY: AuditAction.APPROVAL_APPLIED,
}


def _locked(approval_request: ApprovalRequest, *, expected: tuple[str, ...]) -> ApprovalRequest:
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


def _require_requester(actor, approval_request: ApprovalRequest, verb: str) -> None:
    if actor is None or approval_request.requested_by_id != actor.pk:
        raise PermissionDenied(f"Only the requester may {verb} this request.")


def _require_decider(actor, approval_request: ApprovalRequest, verb: str) -> None:
    if actor is not None and approval_request.requested_by_id == actor.pk:
        raise PermissionDenied(f"You cannot {verb} your own request.")
    if not user_visibility(user=actor).can_decide(approval_request):
        raise PermissionDenied(
            f"Only a manager of {approval_request.parent} may {verb} this request."
        )


def approval_submit(*, actor, approval_request: ApprovalRequest) -> ApprovalRequest:
    """Submit a draft so the managers of its parent see it in their inbox (requester only)."""
    _require_requester(actor, approval_request, "submit")
    with transaction.atomic():
        fresh = _locked(approval_request, expected=(ApprovalState.DRAFT,))
        _decide(
            fresh,
            actor,
            DecisionAction.SUBMIT,
            ApprovalState.SUBMITTED,
            fresh.state,
            "",
            timezone.now(),
        )
    return fresh


def approval_withdraw(
    *, actor, approval_request: ApprovalRequest, comment: str = ""
) -> ApprovalRequest:
    """Withdraw a draft or submitted request (requester only); it is kept with its history."""
    _require_requester(actor, approval_request, "withdraw")
    with transaction.atomic():
        fresh = _locked(approval_request, expected=(ApprovalState.DRAFT, ApprovalState.SUBMITTED))
        _decide(
            fresh,
            actor,
            DecisionAction.WITHDRAW,
            ApprovalState.WITHDRAWN,
            fresh.state,
            comment,
            timezone.now(),
        )
    return fresh


def approval_reject(
    *, actor, approval_request: ApprovalRequest, comment: str, now: datetime | None = None
) -> ApprovalRequest:
    """Reject a submitted request; the comment (required) tells the requester why. ``now``:
    the moment of the decision (default: the current time)."""
    now = now or timezone.now()
    _require_decider(actor, approval_request, "reject")
    if not str(comment or "").strip():
        raise ValidationError({"comment": ["Say why the request is rejected."]})
    with transaction.atomic():
        fresh = _locked(approval_request, expected=(ApprovalState.SUBMITTED,))
        _decide(
            fresh, actor, DecisionAction.REJECT, ApprovalState.REJECTED, fresh.state, comment, now
        )
    return fresh


def approval_approve(
    *,
    actor,
    approval_request: ApprovalRequest,
    comment: str = "",
    now: datetime | None = None,
) -> ApprovalRequest:
    """Approve a submitted request, and apply it at once if its effective date has arrived.

    Holds the parent's row lock while it checks that the change fits in 100 % at every instant
    of its window (beside stored shares and other approved requests still waiting for their
    date), so two managers approving at once cannot both squeeze in: the second gets a
    ``ValidationError`` on ``shares`` and nothing changes. A request approved after its
    effective date starts now, never in the past. Future-dated requests stay approved until
    ``approvals_apply_due`` applies them. ``now``: the moment of the decision (default: the
    current time).
    """
    _require_decider(actor, approval_request, "approve")
    now = now or timezone.now()
    with transaction.atomic():
        lock_parent(approval_request.parent)
        fresh = _locked(approval_request, expected=(ApprovalState.SUBMITTED,))
        if fresh.effective_to is not None and fresh.effective_to <= now:
            raise ValidationError({"effective_to": ["The requested window has already ended."]})
        start = max(fresh.effective_from, now)
        check_siblings_fit(
            parent=fresh.parent,
            cluster=fresh.cluster,
            new_rows=request_rows(fresh, valid_from=start),
            exclude_request_id=fresh.pk,
        )
        _decide(
            fresh, actor, DecisionAction.APPROVE, ApprovalState.APPROVED, fresh.state, comment, now
        )
        if fresh.effective_from <= now:
            _apply_locked(fresh, valid_from=start, set_by=actor, actor=actor, now=now)
    return fresh


def _apply_locked(
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
    for line in lines:
        Allocation.objects.create(
            cluster=approval_request.cluster,
            program=line.program,
            project=line.project,
            percent=line.percent,
            valid_from=valid_from,
            valid_to=approval_request.effective_to,
            set_by=set_by,
            reason=f"{approval_request.reason} (request #{approval_request.pk})",
            approval_request=approval_request,
            created_at=now,
        )
    audit_share_change(
        actor=actor,
        parent=approval_request.parent,
        cluster=cluster,
        before=before,
        after={line.node: line.percent for line in lines},
        valid_from=valid_from,
        valid_to=approval_request.effective_to,
        reason=f"{approval_request.reason} (request #{approval_request.pk})",
        at=now,
    )
    share_change_notify(
        actor=actor,
        cluster=cluster,
        before=before,
        after={line.node: line.percent for line in lines},
        valid_from=valid_from,
        valid_to=approval_request.effective_to,
        reason=f"{approval_request.reason} (request #{approval_request.pk})",
        now=now,
        requester=approval_request.requested_by,
    )
    _decide(
        approval_request,
        None,
        DecisionAction.APPLY,
        ApprovalState.APPLIED,
        ApprovalState.APPROVED,
        f"Applied from {timezone.localtime(valid_from):%Y-%m-%d %H:%M %Z}.",
        now,
    )


# What a requester is told about their request, per decision.
DECIDED_WORDS = {
    DecisionAction.APPROVE: "was approved",
    DecisionAction.REJECT: "was rejected",
    DecisionAction.APPLY: "was applied: the new shares are in force",
    DecisionAction.APPLY_FAILED: "could not be applied",
}


def _tell(approval_request: ApprovalRequest, action: str, actor, comment: str, now) -> None:
    """Notify the people a decision concerns: the deciders when a request is submitted, the
    requester when it is decided, applied or cannot be applied."""
    label = f"Request #{approval_request.pk} ({approval_request.parent} on {approval_request.cluster.name})"
    link = reverse("approval-detail", args=[approval_request.pk])
    by = f" by {actor.get_username()}" if actor is not None else ""
    if action == DecisionAction.SUBMIT:
        notify(
            recipients=request_deciders(approval_request),
            notice=Notice(
                kind=NotificationKind.APPROVAL_AWAITING,
                title=f"{label} awaits your decision",
                body=f"Asked{by}: {approval_request.reason}",
                link=link,
                organization_id=approval_request.organization_id,
                event_key=f"approval:{approval_request.pk}:submitted:{now.isoformat()}",
            ),
            now=now,
        )
        return
    if action in (DecisionAction.APPROVE, DecisionAction.REJECT, DecisionAction.WITHDRAW):
        # Decided or withdrawn: nobody else needs to act on it any more.
        notifications_settle(
            kind=NotificationKind.APPROVAL_AWAITING,
            event_prefix=f"approval:{approval_request.pk}:submitted:",
            now=now,
        )
    if action in DECIDED_WORDS:
        notify(
            recipients=[approval_request.requested_by],
            notice=Notice(
                kind=NotificationKind.APPROVAL_DECIDED,
                title=f"Your {label[0].lower()}{label[1:]} {DECIDED_WORDS[action]}{by}",
                body=comment or "",
                link=link,
                organization_id=approval_request.organization_id,
                event_key=f"approval:{approval_request.pk}:{action}:{now.isoformat()}",
            ),
            now=now,
        )


def _record_apply_failed(approval_request: ApprovalRequest, reason: str, now: datetime) -> None:
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
    _tell(approval_request, DecisionAction.APPLY_FAILED, None, reason, now)


def approval_apply(
    *, approval_request: ApprovalRequest, now: datetime | None = None
) -> ApprovalRequest:
    """Apply an approved request whose effective date has arrived (the system's step).

    Idempotent: a request that is not approved, or not yet due at ``now`` (default: the current
    time), is returned unchanged. The rows start at ``effective_from`` — or at ``now`` when
    that is more than ``PAST_GRACE`` ago, so history is never rewritten — and carry the
    approver as ``set_by``.
    If the change no longer fits in 100 % — or its window has already ended — an
    ``APPLY_FAILED`` decision says why and the request stays approved; no exception is raised.
    """
    now = now or timezone.now()
    with transaction.atomic():
        lock_parent(approval_request.parent)
        fresh = ApprovalRequest.objects.select_for_update().get(pk=approval_request.pk)
        if fresh.state != ApprovalState.APPROVED or fresh.effective_from > now:
            return fresh
        if fresh.effective_to is not None and fresh.effective_to <= now:
            _record_apply_failed(fresh, "Its window ended before it could be applied.", now)
            return fresh
        # On time (or late by no more than the beat's lag) the rows start exactly at the
        # effective date; a request applied much later starts now, never rewriting history.
        start = fresh.effective_from if fresh.effective_from >= now - PAST_GRACE else now
        try:
            check_siblings_fit(
                parent=fresh.parent,
                cluster=fresh.cluster,
                new_rows=request_rows(fresh, valid_from=start),
                exclude_request_id=fresh.pk,
            )
        except ValidationError as exc:
            _record_apply_failed(fresh, " ".join(exc.messages), now)
            return fresh
        approval = (
            fresh.decisions.filter(action=DecisionAction.APPROVE).order_by("-at", "-id").first()
        )
        set_by = approval.actor if approval and approval.actor else fresh.requested_by
        _apply_locked(fresh, valid_from=start, set_by=set_by, now=now)
    return fresh


def approvals_apply_due(*, now: datetime | None = None) -> int:
    """Apply every approved request whose effective date has arrived; return how many applied.

    Run by Celery beat (``governance.tasks.allocations_apply_due``). Each request is applied in
    its own transaction, so one that no longer fits (recorded as ``APPLY_FAILED``) does not
    hold back the others. Safe to run twice at once: each apply re-reads the state under lock.
    """
    now = now or timezone.now()
    due = ApprovalRequest.objects.filter(
        state=ApprovalState.APPROVED, effective_from__lte=now
    ).order_by("effective_from", "id")
    applied = 0
    for approval_request in due.select_related("organization", "program", "cluster"):
        result = approval_apply(approval_request=approval_request, now=now)
        applied += result.state == ApprovalState.APPLIED
    return applied
