"""Browser pages of the live scheduler: the nodes of a cluster (with operator actions) and the
workloads a user may see (state, place in the fair-share order, the engine's reason).

Thin: objects come through the visibility selector (hidden ones are 404s), changes go
through the services, and the pages refresh themselves every few seconds so a running
cluster is seen moving (``?live=0`` stops it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from governance.views.common import visibility_of
from scheduler.api.views import may_cancel, nodes_with_usage, visible_workloads
from scheduler.choices import NodeState, WorkloadState
from scheduler.models import Node, Run, RunNode, SchedulingCycle
from scheduler.services.nodes import node_bring_up, node_drain, node_mark_down, node_undrain
from scheduler.services.workloads import workload_cancel

REFRESH_SECONDS = 5
PAGE_SIZE = 100

# Badge colours of the layout (static/css/app.css), by state.
NODE_BADGES = {
    NodeState.HEALTHY: "badge-applied",
    NodeState.DRAINING: "badge-submitted",
    NodeState.DRAINED: "badge-approved",
    NodeState.DOWN: "badge-rejected",
}
WORKLOAD_BADGES = {
    WorkloadState.PENDING: "badge-submitted",
    WorkloadState.RUNNING: "badge-applied",
    WorkloadState.PREEMPTED: "badge-approved",
    WorkloadState.SUCCEEDED: "badge-draft",
    WorkloadState.FAILED: "badge-rejected",
    WorkloadState.CANCELLED: "badge-withdrawn",
}

# Operator actions: URL name → (service, takes a reason, past tense for the message).
NODE_ACTIONS = {
    "drain": (node_drain, True, "is draining: it takes nothing new and empties as runs pass "
              "their minimum runtime"),
    "undrain": (node_undrain, False, "is back in service"),
    "mark-down": (node_mark_down, True, "is down; its workloads were requeued"),
    "bring-up": (node_bring_up, False, "is back up"),
}  # fmt: skip


def _live(request: HttpRequest) -> int | None:
    """Seconds between page refreshes, or None when the user turned it off."""
    return None if request.GET.get("live") == "0" else REFRESH_SECONDS


@dataclass
class DrainingRun:
    """A run still on a draining node, and when it may be evicted."""

    run: Run
    gpus: int
    protected_until: datetime

    @property
    def evictable(self) -> bool:
        from django.utils import timezone

        return self.protected_until <= timezone.now()


@dataclass
class ClusterNodes:
    """One cluster's nodes for the page, with totals and the latest cycle."""

    cluster: object
    nodes: list
    can_operate: bool
    last_cycle: SchedulingCycle | None
    draining: dict  # node id → [DrainingRun]

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def healthy_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes if n.state == NodeState.HEALTHY)

    @property
    def gpus_in_use(self) -> int:
        return sum(n.gpus_in_use for n in self.nodes)


def _draining_runs(nodes) -> dict[int, list[DrainingRun]]:
    ids = [n.pk for n in nodes if n.state == NodeState.DRAINING]
    rows = RunNode.objects.filter(node_id__in=ids, run__ended_at__isnull=True).select_related(
        "run__workload"
    )
    out: dict[int, list[DrainingRun]] = {}
    for row in rows:
        run = row.run
        until = run.started_at + timedelta(seconds=run.workload.min_runtime_seconds)
        out.setdefault(row.node_id, []).append(
            DrainingRun(run=run, gpus=row.gpus, protected_until=until)
        )
    for runs in out.values():
        runs.sort(key=lambda d: d.protected_until)
    return out


@login_required
@require_safe
def nodes(request: HttpRequest) -> HttpResponse:
    """Every node of the clusters the user sees: state, GPUs in use, drains in progress."""
    vis = visibility_of(request)
    groups = []
    for cluster in vis.clusters().select_related("organization").order_by("name"):
        cluster_nodes = list(nodes_with_usage(Node.objects.filter(cluster=cluster)))
        for node in cluster_nodes:
            node.badge = NODE_BADGES.get(node.state, "badge-draft")
        groups.append(
            ClusterNodes(
                cluster=cluster,
                nodes=cluster_nodes,
                can_operate=vis.is_org_admin(cluster.organization_id),
                last_cycle=SchedulingCycle.objects.filter(cluster=cluster).first(),
                draining=_draining_runs(cluster_nodes),
            )
        )
    for group in groups:
        for node in group.nodes:
            node.draining_runs = group.draining.get(node.pk, [])
    return render(
        request,
        "scheduler/nodes.html",
        {"groups": groups, "refresh": _live(request), "actions": NODE_ACTIONS},
    )


@login_required
@require_POST
def node_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """Drain, undrain, mark down or bring up a node (org admins of its organization)."""
    if action not in NODE_ACTIONS:
        return HttpResponse(status=404)
    vis = visibility_of(request)
    node = get_object_or_404(Node.objects.filter(cluster__in=vis.clusters()), pk=pk)
    if not vis.is_org_admin(node.cluster.organization_id):
        raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
    service, with_reason, done = NODE_ACTIONS[action]
    kwargs = {"reason": request.POST.get("reason", "").strip()[:500]} if with_reason else {}
    try:
        service(node=node, actor=request.user, **kwargs)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{node.name} {done}.")
    return redirect("scheduler:nodes")


@login_required
@require_safe
def workloads(request: HttpRequest) -> HttpResponse:
    """Workloads of the projects the user sees, newest first; ``?state=`` and ``?mine=1``."""
    vis = visibility_of(request)
    rows = visible_workloads(vis).select_related("project", "cluster", "submitted_by")
    state = request.GET.get("state", "")
    if state in WorkloadState.values:
        rows = rows.filter(state=state)
    mine = request.GET.get("mine") == "1"
    if mine:
        rows = rows.filter(submitted_by=request.user)
    counts = {s: 0 for s in WorkloadState.values}
    for value in visible_workloads(vis).values_list("state", flat=True).iterator():
        counts[value] += 1
    page = list(rows.order_by("-submitted_at", "-id")[:PAGE_SIZE])
    for workload in page:
        workload.badge = WORKLOAD_BADGES.get(workload.state, "badge-draft")
        workload.can_cancel = workload.state not in (
            WorkloadState.SUCCEEDED,
            WorkloadState.FAILED,
            WorkloadState.CANCELLED,
        ) and may_cancel(vis, workload)
    return render(
        request,
        "scheduler/workloads.html",
        {
            "workloads": page,
            "state": state,
            "mine": mine,
            "counts": counts,
            "states": WorkloadState.choices,
            "refresh": _live(request),
        },
    )


@login_required
@require_safe
def workload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One workload: its state, place in the queue, the engine's reason, and its runs."""
    vis = visibility_of(request)
    workload = get_object_or_404(
        visible_workloads(vis)
        .select_related("project", "cluster", "submitted_by")
        .prefetch_related(
            Prefetch(
                "runs", queryset=Run.objects.order_by("-attempt").select_related("preempted_by")
            )
        ),
        pk=pk,
    )
    workload.badge = WORKLOAD_BADGES.get(workload.state, "badge-draft")
    can_cancel = workload.state not in (
        WorkloadState.SUCCEEDED,
        WorkloadState.FAILED,
        WorkloadState.CANCELLED,
    ) and may_cancel(vis, workload)
    return render(
        request,
        "scheduler/workload_detail.html",
        {"workload": workload, "can_cancel": can_cancel, "refresh": _live(request)},
    )


@login_required
@require_POST
def workload_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel a workload (its submitter, a PI of its project, an org admin)."""
    vis = visibility_of(request)
    workload = get_object_or_404(visible_workloads(vis).select_related("cluster"), pk=pk)
    if not may_cancel(vis, workload):
        raise PermissionDenied("You may cancel only your own workloads.")
    workload_cancel(workload=workload, actor=request.user)
    messages.success(request, f"{workload.name} is cancelled.")
    return redirect("scheduler:workload-detail", pk=workload.pk)
