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
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.conf import settings
from django.db.models import F, FloatField, Sum
from django.db.models.functions import Cast, TruncDay, TruncHour
from django.utils import timezone

from governance.models import Cluster, Program, Project, UsageDay
from governance.selectors.tree import ShareRow, pick_shares, share_rows
from governance.selectors.usage import first_accounted_hour
from governance.selectors.usage_sources import kept_while_final, usage_sources
from scheduler.engine.fairtree import BudgetTree, Ranking
from scheduler.models import UsageHour
from scheduler.selectors.budget import ClusterBudget, TreeRows, budget_from
from scheduler.selectors.offer_order import OfferOrder, offer_order
from scheduler.selectors.usage import usage_window_by_project

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
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


def _history_instants(
    now: datetime, days: int, first_hour: datetime | None = None
) -> list[datetime]:
    """The UTC midnights ending each of the last ``days`` days, then ``now``; from a new
    installation's ``first_hour`` (``first_accounted_hour``), the ends of its hours instead
    (its history would otherwise be one or two dots)."""
    if first_hour is not None:
        hour = timedelta(hours=1)
        t = first_hour + hour
        hours = []
        while t < now:
            hours.append(t)
            t += hour
        return [*hours, now]
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    points = [today - DAY * (days - 1 - k) for k in range(days)]
    points = [p for p in points if p < now]
    return [*points, now]


def _windowed_usage(
    cluster: Cluster, instants: list[datetime], window: timedelta
) -> list[dict[int, float]]:
    """Charged GPU-seconds per project over the window ending at each past instant.

    The same whole-hour window as ``usage_window_by_project`` (from the hour containing
    ``t - window`` up to ``t``), read in grouped queries: by UTC day when the instants are
    midnights and the window is whole days — closed days from the daily cache
    (``UsageDay``, via ``usage_sources``), the others from the hourly rollup — else by hour.
    A project is in an instant's figures when it has a bucket in that window.
    """
    if not instants:
        return []

    def window_start(t: datetime) -> datetime:
        return (t - window).astimezone(UTC).replace(minute=0, second=0, microsecond=0)

    by_day = window % DAY == timedelta(0) and all(
        t.astimezone(UTC).hour == 0 and t.minute == 0 and t.second == 0 and t.microsecond == 0
        for t in instants
    )
    charged = F("budgeted_gpu_seconds") + F("burst_gpu_seconds")
    step = DAY if by_day else HOUR
    start, end = window_start(instants[0]), instants[-1]
    buckets = -(-(end - start) // step)  # those that start before ``end``
    # Per project, its amount in each bucket from ``start`` (0.0 where it has none) and
    # whether it has that bucket at all.
    amounts: dict[int, list[float]] = {}
    present: dict[int, list[bool]] = {}

    def add(index: int, project_id: int, amount: float) -> None:
        if project_id not in amounts:
            amounts[project_id] = [0.0] * buckets
            present[project_id] = [False] * buckets
        amounts[project_id][index] += amount
        present[project_id][index] = True

    if by_day:
        # Closed days from the daily cache, the rest from the hourly rollup (same figures).
        day_q, hour_q = usage_sources(cluster_ids=[cluster.pk], start=start, end=end)
        if day_q is not None:
            # One row per project and day (``usage_sources`` takes whole days and one set of
            # the open day's rows): no grouping needed, and float8 from the database saves a
            # Decimal per row (the same value: both conversions round to the nearest double).
            first_day = start.date()
            for day, project_id, total in (
                UsageDay.objects.filter(day_q)
                .order_by()  # any order: each row goes to its own bucket
                .values_list("day", "project_id", Cast(charged, FloatField()))
            ):
                add((day - first_day).days, project_id, total)
        hours = UsageHour.objects.filter(hour_q) if hour_q is not None else None
    else:
        hours = UsageHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
    if hours is not None:
        trunc = TruncDay if by_day else TruncHour
        for bucket, project_id, total in (
            hours.annotate(bucket=trunc("hour", tzinfo=UTC))
            .values_list("bucket", "project_id")
            .annotate(total=Sum(charged))
        ):
            add((bucket.astimezone(UTC) - start) // step, project_id, float(total or 0))
    result = []
    for t in instants:
        first = (window_start(t) - start) // step
        last = first + -(-(t - window_start(t)) // step)  # the buckets that start before t
        result.append(
            {
                project_id: sum(values[first:last])  # in bucket order, as before
                for project_id, values in amounts.items()
                if any(present[project_id][first:last])
            }
        )
    return result


def _past_usage(
    cluster: Cluster, instants: list[datetime], window: timedelta
) -> list[dict[int, float]]:
    """``_windowed_usage`` at past ``instants``, kept while every hour it reads is final
    (``kept_while_final``); read every time otherwise (the first hour after midnight, or
    accounting behind)."""
    if not instants:
        return []
    return kept_while_final(
        "fairshare:past-usage",
        cluster_ids=[cluster.pk],
        end=instants[-1],
        inputs=(window.total_seconds(), [t.timestamp() for t in instants]),
        make=lambda: _windowed_usage(cluster, instants, window),
    )


def _budgets_at(
    tree: TreeRows, rows: list[ShareRow], instants: list[datetime]
) -> list[ClusterBudget]:
    """The budget at each instant (``cluster_budget``'s, from rows already read), built once
    per distinct set of share rows in force."""
    budgets: list[ClusterBudget] = []
    cache: dict[frozenset, ClusterBudget] = {}
    for t in instants:
        signature = frozenset(row.order for row in rows if row.covers(t))
        if signature not in cache:
            cache[signature] = budget_from(tree, pick_shares(rows, t))
        budgets.append(cache[signature])
    return budgets


class _Node(NamedTuple):
    """A program or project as the page names it (``program_id`` is None for a program)."""

    id: int
    name: str
    program_id: int | None = None


@dataclass
class _TreeInputs:
    """What every instant's ranking reads besides usage, read once per page."""

    cluster: Cluster
    tree: TreeRows
    share_rows: list[ShareRow]
    programs_by_slug: dict[str, int]
    project_ids: list[int]


@dataclass
class _Ranked:
    """One instant's ranking keyed by ``(kind, id)``: metric, sibling rank, sibling count."""

    ranking: Ranking
    metric: dict[tuple[str, int], float | None]
    sibling_rank: dict[tuple[str, int], int]
    siblings: dict[tuple[str, int], int]
    usage: dict[tuple[str, int], float]
    usage_share: dict[tuple[str, int], float | None]
    budgeted_projects: int


@dataclass
class _TreeIndex:
    """A budget's Fair Tree and the ``(kind, id)`` of each of its nodes, built once for every
    instant of the history that has the same budget (most have)."""

    tree: BudgetTree
    keys: list[tuple[str, int] | None]
    project_by_key: dict[str, int]
    extra: list[str]


def _tree_index(
    budget: ClusterBudget,
    organization_id: int,
    programs_by_slug: dict[str, int],
    all_project_ids: list[int],
) -> _TreeIndex:
    """The tree of ``budget`` with each node's ``(kind, id)`` (None: not in the database)."""
    tree = BudgetTree(budget.root)
    project_by_key = {budget.key(pid): pid for pid in all_project_ids}
    keys: list[tuple[str, int] | None] = []
    for node in tree.nodes:
        if node.parent < 0:
            keys.append(("organization", organization_id))
        elif node.project is not None:
            pid = project_by_key.get(node.project)
            keys.append(("project", pid) if pid is not None else None)
        else:
            pid = programs_by_slug.get(node.name)
            keys.append(("program", pid) if pid is not None else None)
    return _TreeIndex(tree, keys, project_by_key, [budget.key(pid) for pid in all_project_ids])


def _rank(
    budget: ClusterBudget, tree_index: _TreeIndex, usage_by_project: dict[int, float]
) -> _Ranked:
    """Run the engine's Fair Tree ranking and key its per-node figures by ``(kind, id)``."""
    tree, keys, project_by_key = tree_index.tree, tree_index.keys, tree_index.project_by_key
    usage = {budget.key(pid): amount for pid, amount in usage_by_project.items()}
    ranking = tree.rank(usage, extra=tree_index.extra)
    metric, sibling_rank, siblings, node_usage, usage_share = {}, {}, {}, {}, {}
    for index, node in enumerate(tree.nodes):
        key = keys[index]
        if key is None:
            continue
        node_usage[key] = ranking.usage[index]
        if node.parent < 0:
            continue
        parent_usage = ranking.usage[node.parent]
        # usage share ÷ share = (usage / parent usage) / (share / 100) = engine ratio x 100 /
        # parent usage: the engine's own ratio, scaled by a factor common to all siblings.
        # With nothing used under the parent the share of usage is undefined (the engine
        # sees equal ratios and ranks by name): no metric rather than a misleading 0.
        metric[key] = ranking.ratio[index] * 100 / parent_usage if parent_usage > 0 else None
        usage_share[key] = ranking.usage[index] / parent_usage * 100 if parent_usage > 0 else None
        sibling_rank[key] = ranking.sibling_rank[index] + 1
        siblings[key] = len(tree.nodes[node.parent].children)
    for project, amount in ranking.project_usage.items():
        pid = project_by_key.get(project)
        if pid is not None:
            node_usage.setdefault(("project", pid), amount)
    return _Ranked(
        ranking=ranking,
        metric=metric,
        sibling_rank=sibling_rank,
        siblings=siblings,
        usage=node_usage,
        usage_share=usage_share,
        budgeted_projects=len(tree.path),
    )


def _ranked_all(inputs: _TreeInputs, budgets: list[ClusterBudget], usage: list) -> list[_Ranked]:
    """``_rank`` of each budget with its usage, one tree index per distinct budget."""
    organization_id = inputs.cluster.organization_id
    indexes: dict[int, _TreeIndex] = {}  # by budget: instants with the same shares share one
    ranked = []
    for budget, amounts in zip(budgets, usage, strict=True):
        tree_index = indexes.get(id(budget))
        if tree_index is None:
            tree_index = indexes[id(budget)] = _tree_index(
                budget, organization_id, inputs.programs_by_slug, inputs.project_ids
            )
        ranked.append(_rank(budget, tree_index, amounts))
    return ranked


# A past instant's part of each row: its metric and sibling rank, keyed by ``(kind, id)``.
_PastPoint = tuple[dict[tuple[str, int], float | None], dict[tuple[str, int], int]]


def _past_points(inputs: _TreeInputs, instants: list[datetime], window: timedelta):
    """Each past instant's metrics and sibling ranks, kept while every hour they read is
    final (``kept_while_final``) and the tree and its share rows are as they were — ranking
    a fortnight of instants is most of the page's work, and the past does not change."""
    if not instants:
        return []

    def make() -> list[_PastPoint]:
        usage = _past_usage(inputs.cluster, instants, window)
        budgets = _budgets_at(inputs.tree, inputs.share_rows, instants)
        return [(r.metric, r.sibling_rank) for r in _ranked_all(inputs, budgets, usage)]

    return kept_while_final(
        "fairshare:past-ranking",
        cluster_ids=[inputs.cluster.pk],
        end=instants[-1],
        inputs=(
            window.total_seconds(),
            [t.timestamp() for t in instants],
            inputs.tree,
            sorted(
                (
                    r.order,
                    r.node,
                    str(r.percent),
                    r.valid_from.timestamp(),
                    r.valid_to and r.valid_to.timestamp(),
                )
                for r in inputs.share_rows
            ),
        ),
        make=make,
    )


def _visible_ids(visibility, organization_id: int) -> tuple[set[int] | None, set[int] | None, bool]:
    """The programs and projects of the organization the viewer sees (None: all of them),
    and whether they see the organization itself."""
    if visibility.sees_whole_organization(organization_id):
        return None, None, True
    programs = visibility.programs().filter(organization_id=organization_id)
    projects = visibility.projects().filter(program__organization_id=organization_id)
    return (
        set(programs.values_list("id", flat=True)),
        set(projects.values_list("id", flat=True)),
        visibility.organizations().filter(pk=organization_id).exists(),
    )


def _visible_rows(
    visibility,
    cluster: Cluster,
    programs: list[_Node],
    projects: list[_Node],
    past: list[_PastPoint],
    current: _Ranked,
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
    inputs = _TreeInputs(
        cluster=cluster,
        tree=tree,
        share_rows=share_rows(cluster=cluster),
        programs_by_slug={slug: pk for pk, slug in tree.programs},
        project_ids=[p.id for p in projects],
    )
    instants = _history_instants(now, days, first_accounted_hour(cluster=cluster, until=now))
    past = _past_points(inputs, instants[:-1], window)
    current_usage = usage_window_by_project(cluster=cluster, now=now, window_seconds=window_seconds)
    budget_now = budget_from(tree, pick_shares(inputs.share_rows, now))
    (current,) = _ranked_all(inputs, [budget_now], [current_usage])
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
