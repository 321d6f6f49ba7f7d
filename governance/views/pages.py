"""Read-only pages: home, the budget tree of a cluster, a node's allocation history."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_safe

from governance.choices import ApprovalState, Role
from governance.figures import figure_json, tree_sunburst
from governance.forms import TreeFilterForm
from governance.parsing import whole_number
from governance.selectors.approvals import approval_inbox, approval_requests_by
from governance.selectors.home import home_delivery, home_finance, home_nodes, home_queue
from governance.selectors.tree import TreeNode, allocation_history, tree_for
from governance.views.common import organization_of, visibility_of, visible_node

# What each role lets a person do, in the words of the home page.
ROLE_ABILITIES = {
    Role.ORG_ADMIN: "Split the organization's GPU time among its programs, change any split "
    "below it, decide requests from program managers and PIs, grant roles, and operate the "
    "nodes.",
    Role.PROGRAM_MANAGER: "Split your program among its projects directly, decide your PIs' "
    "requests, add researchers to your projects, and ask the org admins for a different "
    "share for your program.",
    Role.PI: "Submit workloads, cancel any of your project's, see your project's share and ask "
    "your program manager for more (or less).",
    Role.RESEARCHER: "Submit workloads to your project, follow them in My queue, and see your "
    "project's share of each cluster.",
    Role.FINANCE: "Read the whole tree and its history, and the usage reports with their cost "
    "(read only).",
}


@login_required
@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """Start page: for each role the answer it opens the product with (the queue, this week's
    delivery, last month's bill, the nodes needing attention), then links and roles."""
    vis = visibility_of(request)
    assignments = [
        (assignment, ROLE_ABILITIES[Role(assignment.role)])
        for assignment in request.user.roles.select_related("organization", "program", "project")
    ]
    open_mine = approval_requests_by(user=request.user).filter(
        state__in=[ApprovalState.DRAFT, ApprovalState.SUBMITTED, ApprovalState.APPROVED]
    )
    context = {
        "assignments": assignments,
        "clusters": list(vis.clusters().select_related("organization")),
        "inbox_count": approval_inbox(user=request.user, visibility=vis).count(),
        "open_mine_count": open_mine.count(),
        "may_decide": bool(vis.admin_org_ids or vis.managed_program_ids),
        "may_request": bool(vis.admin_org_ids or vis.managed_program_ids or vis.pi_project_ids),
        "is_empty": vis.is_empty,
    }
    if not vis.is_empty:
        now = timezone.now()
        queue = home_queue(vis=vis, user=request.user)
        context.update(
            queue=queue,
            may_submit=queue is not None,
            delivery=home_delivery(vis=vis, now=now),
            finance=home_finance(vis=vis, now=now),
            node_glances=home_nodes(vis=vis, now=now),
        )
    return render(request, "governance/home.html", context)


@login_required
@require_safe
def tree_index(request: HttpRequest) -> HttpResponse:
    """The tree without a cluster: go straight to the only one, or let the user pick."""
    clusters = list(visibility_of(request).clusters().select_related("organization"))
    if len(clusters) == 1:
        return redirect("tree", cluster_id=clusters[0].pk)
    return render(request, "governance/tree_index.html", {"clusters": clusters})


@dataclass
class TreeRow:
    """One line of the tree table (a node, or the unallocated rest of a parent)."""

    node: TreeNode | None
    level: int
    kind: str
    label: str
    share: Decimal | None
    effective_share: Decimal | None
    gpus: float | None
    managers: list
    split_url: str = ""
    split_label: str = ""
    history_url: str = ""


def _tree_rows(vis, root: TreeNode, cluster, total_gpus: int) -> list[TreeRow]:
    """Depth-first rows of the visible tree, each parent followed by its children and rest."""
    rows: list[TreeRow] = []

    def walk(node: TreeNode, level: int) -> None:
        row = TreeRow(
            node=node,
            level=level,
            kind=node.kind,
            label=node.obj.name,
            share=node.share,
            effective_share=node.effective_share,
            gpus=node.gpus_entitled,
            managers=node.managers,
        )
        if node.kind in ("organization", "program"):
            url = reverse("split", args=[cluster.pk, node.kind, node.obj.pk])
            if vis.can_manage(node.obj):
                row.split_url, row.split_label = url, "Edit split"
            elif any(vis.can_request(child.obj) for child in node.children):
                row.split_url, row.split_label = url, "Request a change"
        if node.kind in ("program", "project"):
            row.history_url = (
                reverse("history", args=[node.kind, node.obj.pk])
                + "?"
                + urlencode({"cluster": cluster.pk})
            )
        rows.append(row)
        for child in node.children:
            walk(child, level + 1)
        if node.kind != "project" and node.unallocated is not None and node.unallocated > 0:
            effective = node.effective_share * node.unallocated / 100
            rows.append(
                TreeRow(
                    node=None,
                    level=level + 1,
                    kind="unallocated",
                    label=f"Unallocated in {node.obj.name}",
                    share=node.unallocated,
                    effective_share=effective,
                    gpus=float(effective / 100 * total_gpus),
                    managers=[],
                )
            )

    walk(root, 0)
    return rows


@login_required
@require_safe
def tree(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """The budget tree of one cluster: shares, effective shares, GPUs, managers, a sunburst."""
    vis = visibility_of(request)
    clusters = list(vis.clusters().select_related("organization"))
    cluster = get_object_or_404(vis.clusters().select_related("organization"), pk=cluster_id)
    picked = request.GET.get("cluster", "")
    picked_id = whole_number(picked)
    if picked_id is not None and picked_id != cluster.pk:
        # The cluster picker (a plain GET form) names another cluster: show that one.
        query = urlencode({"at": request.GET["at"]}) if request.GET.get("at") else ""
        other = get_object_or_404(vis.clusters(), pk=picked_id)
        return redirect(reverse("tree", args=[other.pk]) + (f"?{query}" if query else ""))
    form = TreeFilterForm(
        {"cluster": cluster.pk, "at": request.GET.get("at", "")}, clusters=clusters
    )
    if not form.is_valid() and "at" in form.errors:
        messages.error(request, f"As of: {form.errors['at'][0]} Showing today instead.")
        form = TreeFilterForm({"cluster": cluster.pk}, clusters=clusters)
    at = form.as_of()
    root = tree_for(visibility=vis, cluster=cluster, at=at)
    total_gpus = cluster.total_gpus
    figure = tree_sunburst(root, cluster_gpus=total_gpus)
    context = {
        "cluster": cluster,
        "clusters": clusters,
        "form": form,
        "at": at,
        "root": root,
        "rows": _tree_rows(vis, root, cluster, total_gpus),
        # Some children hidden from this user: say so rather than let sums look wrong.
        "partial": root.unallocated is None
        or any(child.unallocated is None for child in root.children),
        "figure": figure_json(figure),
        "total_gpus": total_gpus,
    }
    return render(request, "governance/tree.html", context)


@dataclass
class HistoryEntry:
    """An allocation row with the share it replaced on the same cluster (None for the first)."""

    allocation: object
    previous: Decimal | None

    @property
    def delta(self) -> Decimal | None:
        if self.previous is None:
            return None
        return self.allocation.percent - self.previous


@login_required
@require_safe
def node_history(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    """Who changed a program's or project's share, when, to what and why — per cluster."""
    vis = visibility_of(request)
    if kind not in ("program", "project"):
        raise Http404("Only programs and projects have a share history.")
    node = visible_node(vis, kind, pk)
    clusters = list(vis.clusters().filter(organization=organization_of(node)))
    cluster = None
    if request.GET.get("cluster"):
        try:
            cluster_pk = int(request.GET["cluster"])
        except ValueError:
            cluster_pk = None
        cluster = next((c for c in clusters if c.pk == cluster_pk), None)
        if cluster is None:
            messages.warning(request, "That cluster is not one of yours; showing all clusters.")
    sections = []
    for section_cluster in [cluster] if cluster else clusters:
        rows = list(allocation_history(node=node, cluster=section_cluster))
        # Recorded order, oldest first, to say what each change replaced.
        previous: Decimal | None = None
        entries = []
        for allocation in reversed(rows):
            entries.append(HistoryEntry(allocation=allocation, previous=previous))
            previous = allocation.percent
        entries.reverse()
        sections.append({"cluster": section_cluster, "entries": entries})
    parent = node.organization if kind == "program" else node.program
    request_ids = {
        e.allocation.approval_request_id
        for section in sections
        for e in section["entries"]
        if e.allocation.approval_request_id
    }
    visible_request_ids = set(
        vis.approval_requests().filter(pk__in=request_ids).values_list("pk", flat=True)
    )
    context = {
        "node": node,
        "kind": kind,
        "parent": parent,
        "sections": sections,
        "clusters": clusters,
        "cluster": cluster,
        "visible_request_ids": visible_request_ids,
    }
    return render(request, "governance/history.html", context)
