"""The nodes of a cluster as a map of GPUs, and one node with what runs on it.

Built for a thousand nodes: two queries per cluster (the nodes, the GPUs their open runs
hold), no per-node query. Each GPU is one cell, coloured by the project whose workload holds
it. Who sees which workload follows the one visibility rule: a workload of a project the
viewer does not see is "another project's workload" with its GPUs: no name, project, link
or colour of its own (all such work shares one colour and one legend entry).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import QuerySet, Sum
from django.urls import reverse
from django.utils.safestring import mark_safe

from governance.models import Cluster, Project
from scheduler.choices import NodeState
from scheduler.models import Node, RunNode
from scheduler.selectors.protection import drain_due_at, protected_until

# Colours of the map (static/css/nodes.css has p0 … p11); projects beyond them repeat.
PALETTE_SIZE = 12
# The colour (p12) and the legend entry of work of projects the viewer does not see.
HIDDEN_COLOUR = PALETTE_SIZE
HIDDEN_PROJECT = "other projects"
SEARCH_MAX_LENGTH = 100


@dataclass(slots=True)
class NodeWork:
    """One workload's share of one node: its GPUs there and what the viewer may know of it."""

    workload_id: int
    label: str  # the workload's name, or "another project's workload" when it is not visible
    visible: bool
    project: str
    colour: int
    gpus: int
    started_at: datetime
    protected_until: datetime | None  # preemptible for other work after this (None: free lane)
    stop_requested: bool
    drain_due: datetime | None = None  # a drain evicts it after this (None: at once)


@dataclass
class MappedNode:
    """A node of the map: its state, and its GPUs cell by cell (colour index or None)."""

    node: Node
    work: list[NodeWork] = field(default_factory=list)

    @property
    def href(self) -> str:
        """The node's page (the path of ``scheduler:node-detail``, without a reverse() per
        node: a thousand of them cost more than the rest of the row)."""
        return f"{_node_pages()}{self.node.pk}/"

    @property
    def used(self) -> int:
        """GPUs held by open runs."""
        return sum(w.gpus for w in self.work)

    @property
    def cells(self) -> list[int | None]:
        """One entry per GPU: the colour of the project holding it, None when free."""
        out: list[int | None] = []
        for w in self.work:
            out.extend([w.colour] * w.gpus)
        out = out[: self.node.gpus]
        return out + [None] * (self.node.gpus - len(out))

    @property
    def cells_html(self) -> str:
        """The node's GPU squares as HTML (built here: 8,000 of them in a template loop
        would cost more than the rest of the page)."""
        squares = (
            '<i class="g"></i>' if c is None else f'<i class="g p{c}"></i>' for c in self.cells
        )
        return mark_safe("".join(squares))  # only integers go in

    @property
    def title(self) -> str:
        """What hovering over the node says: its state and the GPUs each project holds."""
        held: dict[str, int] = {}
        for w in self.work:
            held[w.project] = held.get(w.project, 0) + w.gpus
        parts = [f"{self.node.name}: {self.node.get_state_display().lower()}, "
                 f"{self.used} of {self.node.gpus} GPUs in use"]  # fmt: skip
        parts += [f"{project} {gpus}" for project, gpus in held.items()]
        return " · ".join(parts)


@dataclass
class ClusterMap:
    """One cluster's map: the nodes shown, counts per state, and the colour legend."""

    cluster: Cluster
    nodes: list[MappedNode]
    total_nodes: int
    state_counts: dict[str, int]
    legend: list[tuple[int, str, int]]  # (colour, project, GPUs held)
    gpus: int
    healthy_gpus: int
    used_gpus: int

    @property
    def state_summary(self) -> list[tuple[str, int]]:
        """(state, nodes) for each state some node is in, in the states' order."""
        return [(state, n) for state, n in self.state_counts.items() if n]


@functools.cache
def _node_pages() -> str:
    """The URL prefix of node pages (``/nodes/``), resolved once."""
    return reverse("scheduler:node-detail", kwargs={"pk": 1}).removesuffix("1/")


class NodeFilterError(ValueError):
    """A filter of the nodes page it cannot read; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def node_filters_parse(params) -> tuple[str, str]:
    """(state, search) from a query string; ``NodeFilterError`` names a bad one."""
    state = params.get("state", "")
    if state and state not in NodeState.values:
        raise NodeFilterError("state", f"{state!r} is not a node state.")
    search = params.get("q", "").strip()
    if len(search) > SEARCH_MAX_LENGTH:
        raise NodeFilterError("q", f"at most {SEARCH_MAX_LENGTH} characters.")
    return state, search


def _project_colours(cluster: Cluster) -> dict[int, int]:
    """A colour per project of the cluster's organization, stable while its projects are."""
    ids = Project.objects.filter(program__organization_id=cluster.organization_id).order_by("pk")
    return {pk: i % PALETTE_SIZE for i, pk in enumerate(ids.values_list("pk", flat=True))}


def _work_by_node(
    nodes: QuerySet[Node], visible_project_ids: set[int], colours: dict[int, int]
) -> dict[int, list]:
    # Plain tuples, not model instances: at 8,000 open runs the instances cost more than
    # the query.
    rows = (
        RunNode.objects.filter(node__in=nodes, run__ended_at__isnull=True)
        .order_by("node_id", "run__started_at", "run_id")
        .values_list(
            "node_id",
            "gpus",
            "run__started_at",
            "run__protected_until",
            "run__stop_requested_at",
            "run__workload_id",
            "run__workload__name",
            "run__workload__min_runtime_seconds",
            "run__workload__project_id",
            "run__workload__project__name",
        )
    )
    out: dict[int, list[NodeWork]] = {}
    for node_id, gpus, started, recorded, stop, wid, name, minimum, project_id, project in rows:
        visible = project_id in visible_project_ids
        out.setdefault(node_id, []).append(
            NodeWork(
                workload_id=wid if visible else 0,
                label=name if visible else "another project's workload",
                visible=visible,
                project=project if visible else HIDDEN_PROJECT,
                colour=colours.get(project_id, 0) if visible else HIDDEN_COLOUR,
                gpus=gpus,
                started_at=started,
                protected_until=protected_until(
                    started_at=started, min_runtime_seconds=minimum, recorded=recorded
                ),
                drain_due=drain_due_at(started_at=started, min_runtime_seconds=minimum),
                stop_requested=stop is not None,
            )
        )
    return out


def cluster_node_map(*, cluster: Cluster, vis, state: str = "", search: str = "") -> ClusterMap:
    """The map of ``cluster`` as ``vis`` may see it, narrowed to ``state`` and to node names
    containing ``search`` (counts and totals are over every node). Five queries."""
    all_nodes = list(Node.objects.filter(cluster=cluster).order_by("name"))
    shown_nodes = [
        n
        for n in all_nodes
        if (not state or n.state == state) and (not search or search.lower() in n.name.lower())
    ]
    colours = _project_colours(cluster)
    visible_projects = set(vis.projects().values_list("id", flat=True))
    narrowed = len(shown_nodes) < len(all_nodes)
    work = _work_by_node(
        Node.objects.filter(pk__in=[n.pk for n in shown_nodes])
        if narrowed
        else Node.objects.filter(cluster=cluster),
        visible_projects,
        colours,
    )
    held = (
        RunNode.objects.filter(node__cluster=cluster, run__ended_at__isnull=True)
        .values_list("run__workload__project_id", "run__workload__project__name")
        .annotate(gpus=Sum("gpus"))
        .order_by()
    )
    counts = dict.fromkeys(NodeState.values, 0)
    for n in all_nodes:
        counts[n.state] += 1
    shown_held: dict[tuple[int, str], int] = {}
    for pk, name, gpus in held:
        key = (
            (colours.get(pk, 0), name)
            if pk in visible_projects
            else (HIDDEN_COLOUR, HIDDEN_PROJECT)
        )
        shown_held[key] = shown_held.get(key, 0) + gpus
    legend = sorted(((c, p, g) for (c, p), g in shown_held.items()), key=lambda x: (-x[2], x[1]))
    return ClusterMap(
        cluster=cluster,
        nodes=[MappedNode(node=n, work=work.get(n.pk, [])) for n in shown_nodes],
        total_nodes=len(all_nodes),
        state_counts=counts,
        legend=legend,
        gpus=sum(n.gpus for n in all_nodes),
        healthy_gpus=sum(n.gpus for n in all_nodes if n.state == NodeState.HEALTHY),
        used_gpus=sum(gpus for _, _, gpus in legend),
    )


def node_with_work(*, node: Node, vis) -> MappedNode:
    """One node and every workload on it, as ``vis`` may see them."""
    visible_projects = set(vis.projects().values_list("id", flat=True))
    work = _work_by_node(
        Node.objects.filter(pk=node.pk), visible_projects, _project_colours(node.cluster)
    )
    return MappedNode(node=node, work=work.get(node.pk, []))
