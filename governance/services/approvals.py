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
from django.utils import timezone

from governance.choices import ApprovalState, DecisionAction
from governance.models import ApprovalLine, ApprovalRequest, Cluster, Organization, Program, Project
from governance.selectors.splits import request_rows
from governance.selectors.tree import share_at
from governance.selectors.visibility import user_visibility
from governance.services.approval_steps import (
    apply_failed_record,
    decision_record,
    request_apply_locked,
    request_locked,
    require_decider,
    require_requester,
)
from governance.services.shares import PAST_GRACE, check_siblings_fit, lock_parent, validate_change


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
        decision_record(
            approval_request, actor, DecisionAction.CREATE, ApprovalState.DRAFT, "", "", now
        )
        if submit:
            decision_record(
                approval_request,
                actor,
                DecisionAction.SUBMIT,
                ApprovalState.SUBMITTED,
                ApprovalState.DRAFT,
                "",
                now,
            )
    return approval_request


def approval_submit(*, actor, approval_request: ApprovalRequest) -> ApprovalRequest:
    """Submit a draft so the managers of its parent see it in their inbox (requester only)."""
    require_requester(actor, approval_request, "submit")
    with transaction.atomic():
        fresh = request_locked(approval_request, expected=(ApprovalState.DRAFT,))
        decision_record(
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
    require_requester(actor, approval_request, "withdraw")
    with transaction.atomic():
        fresh = request_locked(
            approval_request, expected=(ApprovalState.DRAFT, ApprovalState.SUBMITTED)
        )
        decision_record(
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
    require_decider(actor, approval_request, "reject")
    if not str(comment or "").strip():
        raise ValidationError({"comment": ["Say why the request is rejected."]})
    with transaction.atomic():
        fresh = request_locked(approval_request, expected=(ApprovalState.SUBMITTED,))
        decision_record(
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
    require_decider(actor, approval_request, "approve")
    now = now or timezone.now()
    with transaction.atomic():
        lock_parent(approval_request.parent)
        fresh = request_locked(approval_request, expected=(ApprovalState.SUBMITTED,))
        if fresh.effective_to is not None and fresh.effective_to <= now:
            raise ValidationError({"effective_to": ["The requested window has already ended."]})
        start = max(fresh.effective_from, now)
        check_siblings_fit(
            parent=fresh.parent,
            cluster=fresh.cluster,
            new_rows=request_rows(fresh, valid_from=start),
            exclude_request_id=fresh.pk,
        )
        decision_record(
            fresh, actor, DecisionAction.APPROVE, ApprovalState.APPROVED, fresh.state, comment, now
        )
        if fresh.effective_from <= now:
            request_apply_locked(fresh, valid_from=start, set_by=actor, actor=actor, now=now)
    return fresh


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
            apply_failed_record(fresh, "Its window ended before it could be applied.", now)
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
            apply_failed_record(fresh, " ".join(exc.messages), now)
            return fresh
        approval = (
            fresh.decisions.filter(action=DecisionAction.APPROVE).order_by("-at", "-id").first()
        )
        set_by = approval.actor if approval and approval.actor else fresh.requested_by
        request_apply_locked(fresh, valid_from=start, set_by=set_by, now=now)
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
