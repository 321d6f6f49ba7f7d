"""Reads of approval requests: a decider's inbox and a requester's own requests."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from governance.choices import ApprovalState
from governance.models import ApprovalRequest
from governance.selectors.visibility import Visibility, user_visibility


def _with_details(requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    # Inbox and history pages show parent, cluster, requester and every line.
    return requests.select_related(
        "organization", "program", "cluster", "requested_by"
    ).prefetch_related("lines__program", "lines__project", "decisions__actor")


def approval_inbox(*, user, visibility: Visibility | None = None) -> QuerySet[ApprovalRequest]:
    """Submitted requests waiting for ``user`` to decide, oldest first.

    A request is waiting for every manager of its parent node — org admins of its organization
    (for any request in it) and program managers of its program — except its requester, who
    never decides their own request. ``visibility`` is ``user``'s when the caller has it
    already (every page's navigation does).
    """
    vis = visibility if visibility is not None else user_visibility(user=user)
    if vis.user_id is None:
        return ApprovalRequest.objects.none()
    requests = (
        ApprovalRequest.objects.filter(state=ApprovalState.SUBMITTED)
        .filter(
            Q(organization_id__in=vis.admin_org_ids) | Q(program_id__in=vis.managed_program_ids)
        )
        .exclude(requested_by_id=vis.user_id)
    )
    return _with_details(requests).order_by("created_at", "id")


def approval_requests_by(*, user) -> QuerySet[ApprovalRequest]:
    """The requests ``user`` made, in every state, newest first."""
    if user is None or not user.is_authenticated:
        return ApprovalRequest.objects.none()
    return _with_details(ApprovalRequest.objects.filter(requested_by=user)).order_by(
        "-created_at", "-id"
    )
