"""Approval pages: the decider's inbox, the requester's list, a request's detail and decisions."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST, require_safe

from governance.choices import ApprovalState
from governance.forms import DecisionForm
from governance.models import ApprovalRequest
from governance.selectors.approvals import approval_inbox, approval_requests_by
from governance.selectors.splits import SplitOutcome, request_rows, split_outcome
from governance.selectors.tree import share_at
from governance.services.approvals import approval_approve, approval_reject, approval_withdraw
from governance.views.common import visibility_of


@login_required
@require_safe
def approval_inbox_view(request: HttpRequest) -> HttpResponse:
    """Requests waiting for this user's decision, oldest first."""
    requests = approval_inbox(user=request.user, visibility=visibility_of(request))
    return render(
        request,
        "governance/inbox.html",
        {"requests": requests, "vis": visibility_of(request)},
    )


@login_required
@require_safe
def my_requests(request: HttpRequest) -> HttpResponse:
    """The requests this user made, in every state, newest first."""
    requests = approval_requests_by(user=request.user)
    return render(request, "governance/my_requests.html", {"requests": requests})


@dataclass
class LineView:
    """A line of a request with the node's share today."""

    line: object
    now: Decimal

    @property
    def delta(self) -> Decimal:
        return self.line.percent - self.line.previous_percent


# Each decision's comment field: its label, and whether it is required.
DECISION_FIELDS = {
    "approve": ("Note to the requester (optional)", False),
    "reject": ("Why you reject it (required)", True),
    "withdraw": ("Why you withdraw it (optional)", False),
}


def decision_form(prefix: str, data=None) -> DecisionForm:
    """The comment form of one decision (its prefix keeps the three forms apart)."""
    label, required = DECISION_FIELDS[prefix]
    return DecisionForm(data, prefix=prefix, label=label, require_comment=required)


def _detail_context(
    request, approval_request, approve_form=None, reject_form=None, withdraw_form=None
):
    vis = visibility_of(request)
    lines = [
        LineView(line=line, now=share_at(node=line.node, cluster=approval_request.cluster))
        for line in approval_request.lines.select_related("program", "project")
    ]
    decisions = approval_request.decisions.select_related("actor").order_by("at", "id")
    may_decide = approval_request.state == ApprovalState.SUBMITTED and vis.can_decide(
        approval_request
    )
    may_withdraw = vis.can_withdraw(approval_request)
    return {
        "outcome": _outcome_view(vis, approval_request),
        "req": approval_request,
        "now": timezone.now(),
        "lines": lines,
        "decisions": decisions,
        "may_decide": may_decide,
        "may_withdraw": may_withdraw,
        "is_requester": approval_request.requested_by_id == request.user.pk,
        "approve_form": approve_form or decision_form("approve"),
        "reject_form": reject_form or decision_form("reject"),
        "withdraw_form": withdraw_form or decision_form("withdraw"),
    }


@dataclass
class OutcomeView:
    """The split a request would leave, as this viewer may see it: their visible children one
    by one, the others only as a sum (``hidden_before`` / ``hidden_after``, ``hidden_count``)."""

    outcome: SplitOutcome
    rows: list
    hidden_count: int
    hidden_before: Decimal
    hidden_after: Decimal


def _outcome_view(vis, approval_request: ApprovalRequest) -> OutcomeView | None:
    """What approving (or applying) ``approval_request`` would make of its parent's split."""
    if approval_request.state not in (ApprovalState.SUBMITTED, ApprovalState.APPROVED):
        return None
    if approval_request.effective_to and approval_request.effective_to <= timezone.now():
        return None
    start = max(approval_request.effective_from, timezone.now())
    outcome = split_outcome(
        parent=approval_request.parent,
        cluster=approval_request.cluster,
        new_rows=request_rows(approval_request, valid_from=start),
        exclude_request_id=approval_request.pk,
    )
    if outcome is None:
        return None
    children = vis.projects() if approval_request.program_id else vis.programs()
    visible = set(children.values_list("id", flat=True))
    shown = [row for row in outcome.rows if row.node.pk in visible]
    hidden = [row for row in outcome.rows if row.node.pk not in visible]
    return OutcomeView(
        outcome=outcome,
        rows=shown,
        hidden_count=len(hidden),
        hidden_before=sum((row.before for row in hidden), Decimal(0)),
        hidden_after=sum((row.after for row in hidden), Decimal(0)),
    )


def _visible_request(request: HttpRequest, pk: int) -> ApprovalRequest:
    queryset = (
        visibility_of(request)
        .approval_requests()
        .select_related("organization", "program", "cluster", "requested_by")
    )
    return get_object_or_404(queryset, pk=pk)


@login_required
@require_safe
def approval_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One request: its lines (current → requested), state, full history and the actions."""
    approval_request = _visible_request(request, pk)
    return render(
        request, "governance/request_detail.html", _detail_context(request, approval_request)
    )


def _decide(request: HttpRequest, pk: int, *, prefix: str, service, done: str) -> HttpResponse:
    """Run one decision service on a visible request; re-render the detail on refusal."""
    approval_request = _visible_request(request, pk)
    form = decision_form(prefix, request.POST)
    if form.is_valid():
        try:
            service(
                actor=request.user,
                approval_request=approval_request,
                comment=form.cleaned_data["comment"],
            )
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            messages.success(request, f"Request #{approval_request.pk} {done}.")
            return redirect("approval-detail", pk=approval_request.pk)
    approval_request.refresh_from_db()
    context = _detail_context(request, approval_request, **{f"{prefix}_form": form})
    return render(request, "governance/request_detail.html", context)


@login_required
@require_POST
def approval_approve_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve a submitted request (a manager of its parent, not its requester)."""
    return _decide(request, pk, prefix="approve", service=approval_approve, done="approved")


@login_required
@require_POST
def approval_reject_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Reject a submitted request with a comment the requester will read."""
    return _decide(request, pk, prefix="reject", service=approval_reject, done="rejected")


@login_required
@require_POST
def approval_withdraw_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Withdraw one's own request before it is decided."""
    return _decide(request, pk, prefix="withdraw", service=approval_withdraw, done="withdrawn")
