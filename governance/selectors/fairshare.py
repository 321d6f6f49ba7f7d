"""Why the queue is ordered this way: the engine's Fair Tree ranking, node by node, over time.

The ranking is the engine's own (``scheduler.engine.fairtree.BudgetTree.rank``) fed with the
live cycle's inputs (``scheduler.selectors.budget.cluster_budget`` for the tree and
``scheduler.selectors.usage.usage_window_by_project`` for charged GPU-seconds over
``SCHEDULER_WINDOW_SECONDS``), so this page cannot disagree with the scheduler about the
order. Nothing here re-implements the formula.

What a page shows for a node is the engine's sibling ratio *usage ÷ share* normalised by the
parent's usage: **usage share ÷ share** = (usage ÷ parent's usage) ÷ (share ÷ 100). It orders
siblings exactly as the engine's ratio does (the two differ by a factor common to all
siblings) and reads as "1.00 = used exactly its share of what its parent used; below 1 goes
first". When nothing was used under a parent the metric is undefined (shown as none); the
engine then sees equal ratios and ranks the children by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.conf import settings
from django.utils import timezone

from governance.models import Cluster, Program, Project
from governance.selectors.fairshare_history import history_instants, past_usage, windowed_usage
from governance.selectors.fairshare_ranks import (
    PastPoint,
    Ranked,
    TreeInputs,
    past_points,
    ranked_all,
)
from governance.selectors.tree import pick_shares, share_rows
from governance.selectors.usage import first_accounted_hour
from scheduler.selectors.budget import ClusterBudget, TreeRows, budget_from
from scheduler.selectors.offer_order import OfferOrder, offer_order
from scheduler.selectors.usage import usage_window_by_project

# The history's readers under the names tests import from here.
_past_usage = past_usage
_windowed_usage = windowed_usage

DAY = timedelta(days=1)
MAX_HISTORY_DAYS = 60


@dataclass
class FairShareRow:
    """One node of the tree with its place in the Fair Tree ranking now and over time.

    ``share`` is the node's percent of its parent (``None`` for the organization).
    ``budgeted`` is whether the engine's tree holds it (a share above 0 under a budgeted
    parent); unbudgeted projects run after every budgeted one. ``usage_gpu_seconds`` is
    ``None`` when the viewer does not see the node's whole subtree (its total would reveal
    other teams' usage). ``metric`` is usage share ÷ share (see the module docstring),
    ``None`` for unbudgeted nodes and when nothing was used under the parent;
    ``sibling_rank`` is 1 for the sibling that goes first, out of ``siblings`` budgeted
    siblings. ``order_position`` (projects only) is the 1-based place of the project in the
    order the next cycle offers free GPUs (``scheduler.selectors.offer_order``: projects
    below their entitlement first, the one holding the smallest part of it first, then the
    Fair Tree order); ``running_gpus`` and ``entitled_gpus`` are its charged GPUs running
    now and its entitlement in whole GPUs
    (``None`` without a share), ``below_entitlement`` whether it is served first now. ``history`` and ``rank_history`` hold the metric and sibling rank
    at each instant of ``FairShareView.instants`` (``None`` where the node was unbudgeted).
    """

    kind: str
    id: int
    name: str
    depth: int
    parent: tuple[str, int] | None
    share: Decimal | None
    budgeted: bool
    whole: bool
    usage_gpu_seconds: float | None = None
    usage_share: float | None = None
    metric: float | None = None
    sibling_rank: int | None = None
    siblings: int = 0
    order_position: int | None = None
    running_gpus: int | None = None
    entitled_gpus: int | None = None
    below_entitlement: bool = False
    history: list[float | None] = field(default_factory=list)
    rank_history: list[int | None] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        """``(kind, id)``, unique across the three levels."""
        return (self.kind, self.id)

    @property
    def usage_gpu_hours(self) -> float | None:
        """Charged GPU-hours over the window (``None`` when hidden from the viewer)."""
        return None if self.usage_gpu_seconds is None else self.usage_gpu_seconds / 3600


@dataclass
class FairShareView:
    """The ranking of one cluster's tree as the viewer may see it.

    ``rows`` walk the tree depth-first in ranking order (each parent, then its children,
    first-to-go first; unbudgeted children last). ``project_order`` lists the visible
    projects in the engine's order. ``instants`` are the ends of the last days (UTC
    midnights; of the last hours when accounting began under two days ago) followed by
    ``now``: the points of each row's history. ``hourly`` says which.
    """

    cluster: Cluster
    now: datetime
    window_seconds: int
    instants: list[datetime]
    rows: list[FairShareRow]
    project_order: list[FairShareRow]
    budgeted_projects: int
    total_projects: int

    @property
    def hourly(self) -> bool:
        """The history's points are hours (accounting began under two days ago)."""
        past = self.instants[:-1]
        return len(past) > 1 and past[1] - past[0] < DAY

    def children_of(self, key: tuple[str, int]) -> list[FairShareRow]:
        """The visible children of the node ``key``, in ranking order."""
        return [row for row in self.rows if row.parent == key]

    def row(self, key: tuple[str, int] | None) -> FairShareRow | None:
        """The row of node ``key`` if the viewer sees it."""
        index = self.__dict__.get("_by_key")
        if index is None:
            index = self.__dict__["_by_key"] = {row.key: row for row in self.rows}
        return index.get(key)


def _whole_keys(visibility, organization_id: int, programs, projects) -> set[tuple[str, int]]:
    """Nodes whose whole subtree the viewer sees (their usage totals may be shown)."""
    if visibility.sees_whole_organization(organization_id):
        keys = {("organization", organization_id)}
        keys |= {("program", p.id) for p in programs}
        keys |= {("project", p.id) for p in projects}
        return keys
    keys = {("program", p.id) for p in programs if p.id in visibility.managed_program_ids}
    keys |= {
        ("project", p.id)
        for p in projects
        if p.program_id in visibility.managed_program_ids
        or p.id in visibility.pi_project_ids | visibility.member_project_ids
    }
    return keys


class _Node(NamedTuple):
    """A program or project as the page names it (``program_id`` is None for a program)."""

    id: int
    name: str
    program_id: int | None = None


class _VisibleIds(NamedTuple):
    """The programs and projects of an organization the viewer sees (None: all of them), and
    whether they see the organization itself."""

    programs: set[int] | None
    projects: set[int] | None
    organization: bool


def _visible_ids(visibility, organization_id: int) -> _VisibleIds:
    """The programs and projects of the organization the viewer sees (None: all of them),
    and whether they see the organization itself."""
    if visibility.sees_whole_organization(organization_id):
        return _VisibleIds(None, None, True)
    programs = visibility.programs().filter(organization_id=organization_id)
    projects = visibility.projects().filter(program__organization_id=organization_id)
    return _VisibleIds(
        set(programs.values_list("id", flat=True)),
        set(projects.values_list("id", flat=True)),
        visibility.organizations().filter(pk=organization_id).exists(),
    )


def _visible_rows(
    visibility,
    cluster: Cluster,
    programs: list[_Node],
    projects: list[_Node],
    past: list[PastPoint],
    current: Ranked,
    offers: OfferOrder,
    budget_now: ClusterBudget,
) -> list[FairShareRow]:
    """The rows the viewer sees, depth-first in ranking order: the organization, each
    visible program, then its visible projects (first-to-go first, unbudgeted last)."""
    organization_id = cluster.organization_id
    offer_position = {pid: position for position, pid in enumerate(offers.order, start=1)}
    visible_programs, visible_projects, sees_org = _visible_ids(visibility, organization_id)
    whole = _whole_keys(visibility, organization_id, programs, projects)
    # Shares of every node now (percent of the parent), also those the engine leaves out.
    shares_now = budget_now.shares

    def make(kind: str, obj, depth: int, parent) -> FairShareRow:
        key = (kind, obj.id)
        row = FairShareRow(
            kind=kind,
            id=obj.id,
            name=obj.name,
            depth=depth,
            parent=parent,
            share=None if kind == "organization" else shares_now.get(key, Decimal(0)),
            budgeted=kind == "organization" or key in current.sibling_rank,
            whole=key in whole,
            metric=current.metric.get(key),
            usage_share=current.usage_share.get(key) if key in whole else None,
            sibling_rank=current.sibling_rank.get(key),
            siblings=current.siblings.get(key, 0),
            order_position=offer_position.get(obj.id) if kind == "project" else None,
            running_gpus=offers.running.get(obj.id) if kind == "project" else None,
            entitled_gpus=offers.entitled.get(obj.id) if kind == "project" else None,
            below_entitlement=kind == "project" and obj.id in offers.below,
            history=[*(metric.get(key) for metric, _ in past), current.metric.get(key)],
            rank_history=[*(rank.get(key) for _, rank in past), current.sibling_rank.get(key)],
        )
        if row.whole:
            row.usage_gpu_seconds = current.usage.get(key, 0.0)
        return row

    def sort_key(row: FairShareRow):
        return (row.sibling_rank is None, row.sibling_rank or 0, row.name)

    rows: list[FairShareRow] = []
    if sees_org:
        organization = cluster.organization
        rows.append(make("organization", organization, 0, None))
        program_rows = sorted(
            (
                make("program", p, 1, ("organization", organization_id))
                for p in programs
                if visible_programs is None or p.id in visible_programs
            ),
            key=sort_key,
        )
        for program_row in program_rows:
            rows.append(program_row)
            rows.extend(
                sorted(
                    (
                        make("project", p, 2, program_row.key)
                        for p in projects
                        if p.program_id == program_row.id
                        and (visible_projects is None or p.id in visible_projects)
                    ),
                    key=sort_key,
                )
            )
    return rows


def fairshare_ranking(
    *, visibility, cluster: Cluster, now: datetime | None = None, days: int = 14
) -> FairShareView:
    """The Fair Tree ranking of ``cluster``'s tree now and at the end of each of the last days.

    The caller resolves ``cluster`` through ``visibility.clusters()`` first (a 404 for a
    cluster the user cannot see). Rows are the nodes the viewer sees (org admin / finance:
    all; program manager: the organization, their program and its projects; PI and
    researcher: their project and its ancestors). Ranks and the metric of every visible
    node are shown — they explain the viewer's place in the queue; usage totals only for
    nodes whose whole subtree the viewer sees. "Now" uses exactly the live cycle's inputs;
    each past instant uses the shares in force then and the same whole-hour window, read in
    one grouped query. ``days`` is capped at 60.
    """
    now = now or timezone.now()
    days = max(1, min(int(days), MAX_HISTORY_DAYS))
    window_seconds = int(settings.SCHEDULER_WINDOW_SECONDS)
    window = timedelta(seconds=window_seconds)
    organization = cluster.organization
    programs, program_slugs = [], []
    named = Program.objects.filter(organization=organization).order_by("name")
    for pk, name, slug in named.values_list("id", "name", "slug"):
        programs.append(_Node(pk, name))
        program_slugs.append((pk, slug))
    projects, project_slugs = [], []
    named = Project.objects.filter(program__organization=organization).order_by("name")
    for pk, name, slug, program_id in named.values_list("id", "name", "slug", "program_id"):
        projects.append(_Node(pk, name, program_id))
        project_slugs.append((pk, slug, program_id))
    tree = TreeRows(  # by id, as ``tree_rows`` reads it
        organization_slug=organization.slug,
        programs=tuple(sorted(program_slugs)),
        projects=tuple(sorted(project_slugs)),
    )
    inputs = TreeInputs(
        cluster=cluster,
        tree=tree,
        share_rows=share_rows(cluster=cluster),
        programs_by_slug={slug: pk for pk, slug in tree.programs},
        project_ids=[p.id for p in projects],
    )
    instants = history_instants(now, days, first_accounted_hour(cluster=cluster, until=now))
    past = past_points(inputs, instants[:-1], window)
    current_usage = usage_window_by_project(cluster=cluster, now=now, window_seconds=window_seconds)
    budget_now = budget_from(tree, pick_shares(inputs.share_rows, now))
    (current,) = ranked_all(inputs, [budget_now], [current_usage])
    offers = offer_order(
        cluster=cluster,
        budget=budget_now,
        usage=current_usage,
        project_ids=inputs.project_ids,
        now=now,
    )
    rows = _visible_rows(visibility, cluster, programs, projects, past, current, offers, budget_now)
    project_rows = [row for row in rows if row.kind == "project"]
    project_order = sorted(
        project_rows, key=lambda r: (r.order_position is None, r.order_position or 0, r.name)
    )
    return FairShareView(
        cluster=cluster,
        now=now,
        window_seconds=window_seconds,
        instants=instants,
        rows=rows,
        project_order=project_order,
        budgeted_projects=current.budgeted_projects,
        total_projects=len(projects),
    )
