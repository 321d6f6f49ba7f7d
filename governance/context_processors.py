"""Template context shared by every page: the role-aware navigation."""

from __future__ import annotations

import contextlib

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from governance.selectors.approvals import approval_inbox
from governance.selectors.notifications import unread_count


def navigation(request: HttpRequest) -> dict:
    """Navigation entries for the signed-in user, with the inbox count for deciders and the
    unread notifications for the bell.

    Entries follow the roles (via the visibility selector): the tree, workloads and nodes for
    anyone with a role, the inbox for managers, "My requests" for those who may ask for a change,
    the dashboards for org admins, finance, program managers and PIs.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav_items": [], "unread_notifications": 0}
    from governance.views.common import visibility_of

    vis = visibility_of(request)
    path = request.path
    items = [{"label": "Home", "url": reverse("home"), "count": None}]
    if not vis.is_empty:
        items.append({"label": "Budget tree", "url": reverse("tree-index"), "count": None})
    if vis.admin_org_ids or vis.managed_program_ids:
        items.append(
            {
                "label": "Inbox",
                "url": reverse("approval-inbox"),
                "count": approval_inbox(user=user, visibility=vis).count(),
            }
        )
    if vis.admin_org_ids or vis.managed_program_ids or vis.pi_project_ids:
        items.append({"label": "My requests", "url": reverse("my-requests"), "count": None})
    if not vis.is_empty:
        # The live scheduler's pages (scheduler/web_urls.py), when that app is wired in.
        for label, name in (("Workloads", "scheduler:workloads"), ("Nodes", "scheduler:nodes")):
            with contextlib.suppress(NoReverseMatch):
                items.append({"label": label, "url": reverse(name), "count": None})
    if vis.admin_org_ids or vis.finance_org_ids or vis.managed_program_ids or vis.pi_project_ids:
        # Owed vs delivered, fair-share order, cluster health (governance/views/dashboards.py).
        with contextlib.suppress(NoReverseMatch):
            items.append(
                {"label": "Dashboards", "url": reverse("dashboards:delivery"), "count": None}
            )
    if vis.admin_org_ids or vis.managed_program_ids:
        # Replay a trace through the engine (scheduler/views/simulations.py, docs/simulator-page.md).
        with contextlib.suppress(NoReverseMatch):
            items.append(
                {"label": "Simulator", "url": reverse("scheduler:simulator"), "count": None}
            )
    if vis.can_view_reports:  # finance and org admins (governance/views/reports.py)
        items.append({"label": "Usage report", "url": reverse("reports:usage"), "count": None})
    if vis.admin_org_ids or vis.managed_program_ids:  # governance/views/roles.py
        items.append({"label": "People", "url": reverse("people:roles"), "count": None})
    if vis.admin_org_ids:  # the audit trail (governance/views/audit.py)
        items.append({"label": "Audit", "url": reverse("audit:events"), "count": None})
    for item in items:
        url = item["url"]
        item["active"] = path == url if url == "/" else path.startswith(url)
    if path.startswith("/dashboards/"):
        for item in items:
            item["active"] = item["label"] == "Dashboards"
    # The tree's pages live under /clusters/ and /history/ too.
    if path.startswith(("/clusters/", "/history/")):
        for item in items:
            item["active"] = item["label"] == "Budget tree"
    if path.startswith("/requests/") and not path.startswith(("/requests/inbox", "/requests/mine")):
        for item in items:
            item["active"] = False
    return {"nav_items": items, "unread_notifications": unread_count(user=user)}
