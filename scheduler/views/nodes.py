"""The nodes pages: every node of the clusters the user sees as a map of GPUs, one node's
page, and the operator actions (drain, undrain, mark down, bring up) with their confirmation."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_safe

from governance.views.common import visibility_of
from scheduler.choices import NODE_BADGES, NodeState
from scheduler.models import Node, SchedulingCycle
from scheduler.selectors.node_map import (
    NodeFilterError,
    cluster_node_map,
    node_filters_parse,
    node_with_work,
)
from scheduler.services.nodes import node_bring_up, node_drain, node_mark_down, node_undrain
from scheduler.views.common import live_refresh

# Operator actions: URL name → (service, takes a reason, past tense for the message).
NODE_ACTIONS = {
    "drain": (node_drain, True, "is draining: it takes nothing new and empties as runs pass "
              "their minimum runtime"),
    "undrain": (node_undrain, False, "is back in service"),
    "mark-down": (node_mark_down, True, "is down; its workloads were requeued"),
    "bring-up": (node_bring_up, False, "is back up"),
}  # fmt: skip


# What each operator action does, said on its confirmation page.
NODE_ACTION_EFFECTS = {
    "drain": "Nothing new lands on it; each workload on it is evicted once past its minimum "
    "runtime (and requeued), so no protected work is lost. It becomes drained when empty.",
    "undrain": "It takes new work again at the next scheduling cycle.",
    "mark-down": "Every workload on it is stopped at the next scheduling cycle and requeued, "
    "protected or not; nothing lands on it until it is brought up.",
    "bring-up": "It takes new work again at the next scheduling cycle.",
}
# Which actions a node in each state offers.
NODE_STATE_ACTIONS = {
    NodeState.HEALTHY: ("drain", "mark-down"),
    NodeState.DRAINING: ("undrain", "mark-down"),
    NodeState.DRAINED: ("undrain", "mark-down"),
    NodeState.DOWN: ("bring-up",),
}
NODE_ACTION_LABELS = {
    "drain": "Drain",
    "undrain": "Undrain",
    "mark-down": "Mark down",
    "bring-up": "Bring up",
}


@login_required
@require_safe
def nodes(request: HttpRequest) -> HttpResponse:
    """Every node of the clusters the user sees as a map of GPUs coloured by project, with
    counts per state, ``?state=`` and ``?q=`` (name contains) filters, and the drains in
    progress; each node links to its own page (where operators act)."""
    vis = visibility_of(request)
    try:
        state, search = node_filters_parse(request.GET)
    except NodeFilterError as exc:
        return render(request, "scheduler/nodes.html", {"error": exc, "groups": []}, status=400)
    groups = []
    for cluster in vis.clusters().select_related("organization").order_by("name"):
        node_map = cluster_node_map(cluster=cluster, vis=vis, state=state, search=search)
        node_map.last_cycle = SchedulingCycle.objects.filter(cluster=cluster).first()
        node_map.draining = [m for m in node_map.nodes if m.node.state == NodeState.DRAINING]
        node_map.can_operate = vis.is_org_admin(cluster.organization_id)
        groups.append(node_map)
    return render(
        request,
        "scheduler/nodes.html",
        {
            "groups": groups,
            "state": state,
            "search": search,
            "states": NodeState.choices,
            "refresh": live_refresh(request),
            "now": timezone.now(),
        },
    )


def _operable_node(request: HttpRequest, pk: int):
    """(visibility, node) for a node of a cluster the user sees, else 404."""
    vis = visibility_of(request)
    node = get_object_or_404(
        Node.objects.filter(cluster__in=vis.clusters()).select_related("cluster"), pk=pk
    )
    return vis, node


@login_required
@require_safe
def node_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One node: state and why, heartbeat, every workload on it (with its protection), and
    for an org admin the actions its state allows."""
    vis, node = _operable_node(request, pk)
    mapped = node_with_work(node=node, vis=vis)
    can_operate = vis.is_org_admin(node.cluster.organization_id)
    return render(
        request,
        "scheduler/node_detail.html",
        {
            "mapped": mapped,
            "node": node,
            "badge": NODE_BADGES.get(node.state, "badge-draft"),
            "actions": [(a, NODE_ACTION_LABELS[a]) for a in NODE_STATE_ACTIONS.get(node.state, ())]
            if can_operate
            else [],
            "refresh": live_refresh(request),
            "now": timezone.now(),
        },
    )


@login_required
def node_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """Drain, undrain, mark down or bring up a node (org admins of its organization): GET
    asks to confirm, says what the action does and takes the reason; POST acts."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    if action not in NODE_ACTIONS:
        return HttpResponse(status=404)
    vis, node = _operable_node(request, pk)
    if not vis.is_org_admin(node.cluster.organization_id):
        raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
    service, with_reason, done = NODE_ACTIONS[action]
    if request.method != "POST":
        return render(
            request,
            "scheduler/node_action.html",
            {
                "node": node,
                "action": action,
                "label": NODE_ACTION_LABELS[action],
                "effect": NODE_ACTION_EFFECTS[action],
                "with_reason": with_reason,
                "mapped": node_with_work(node=node, vis=vis),
            },
        )
    kwargs = {"reason": request.POST.get("reason", "").strip()[:500]} if with_reason else {}
    try:
        service(node=node, actor=request.user, **kwargs)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{node.name} {done}.")
    return redirect("scheduler:node-detail", pk=node.pk)
