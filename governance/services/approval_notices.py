"""Who hears about an approval request's decisions: the deciders when it is submitted, the
requester when it is decided, applied or cannot be applied."""

from __future__ import annotations

from datetime import datetime

from django.urls import reverse

from governance.choices import DecisionAction, NotificationKind
from governance.models import ApprovalRequest
from governance.services.notifications import (
    Notice,
    notifications_settle,
    notify,
    request_deciders,
)

# What a requester is told about their request, per decision.
DECIDED_WORDS = {
    DecisionAction.APPROVE: "was approved",
    DecisionAction.REJECT: "was rejected",
    DecisionAction.APPLY: "was applied: the new shares are in force",
    DecisionAction.APPLY_FAILED: "could not be applied",
}


def approval_notify(
    approval_request: ApprovalRequest, action: str, actor, comment: str, now: datetime
) -> None:
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
