"""What-if: the last weeks of a cluster's real demand replayed under today's tree and under a
proposed one, team by team.

Both replays are the simulator's (``scheduler.simulator.replay``, the live engine's policy)
on the same trace (``ledger_trace``), the cluster's size and node shape, and the same usage
window before the trace; only the tree differs. Past demand is not future demand, and work
people did not submit because the queue was long is not in the trace: the page says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from governance.models import Cluster, Project
from governance.selectors.tree import shares_at
from scheduler.engine import BudgetNode
from scheduler.selectors.budget import budget_from, tree_rows
from scheduler.selectors.ledger_trace import LedgerTrace, ledger_trace
from scheduler.simulator import Budget, ReplayConfig, replay
from scheduler.simulator.durations import format_duration
from scheduler.simulator.metrics import compute_metrics, percentile
from scheduler.simulator.replay import ReplayResult

DEFAULT_DAYS = 14
MAX_DAYS = 60


@dataclass(frozen=True)
class TeamFigures:
    """One team's figures in one replay (GPU-hours; ratios from 0 to 1; waits in seconds)."""

    owed_gpu_hours: float
    delivered_gpu_hours: float
    #: Σ over hours of min(delivered, owed): what was delivered of what was owed
    delivered_of_owed_gpu_hours: float
    delivery_ratio: float | None
    hourly_delivery_ratio: float | None
    wait_p90: float | None
    debug_wait_p50: float | None
    debug_wait_p90: float | None
    other_wait_p50: float | None
    other_wait_p90: float | None
    preemptions: int


@dataclass(frozen=True)
class TeamEffect:
    """A team under today's tree and the proposal: ``project`` is the engine's
    ``program/project`` name, ``project_id`` and ``name`` the project's (None and the
    engine's name for one no longer in the tree)."""

    project: str
    today: TeamFigures
    proposed: TeamFigures
    project_id: int | None = None
    name: str = ""


@dataclass
class WhatIf:
    """The two replays' figures per team, and the sentence that says what changes most."""

    start: datetime
    end: datetime
    gpus: int
    gpus_per_node: int
    jobs: int
    counts: dict[str, int]
    teams: list[TeamEffect] = field(default_factory=list)
    summary: str = ""


def budget_of(node: BudgetNode) -> Budget:
    """The engine's budget tree as the simulator's ``Budget`` (same names and shares)."""
    return Budget(name=node.name, share=node.share, children=[budget_of(c) for c in node.children])


def what_if(
    *,
    cluster: Cluster,
    proposed: dict[tuple[str, int], Decimal],
    end: datetime | None = None,
    days: int = DEFAULT_DAYS,
    on_first_replay: Callable[[], None] | None = None,
) -> WhatIf:
    """Replay the ``days`` before ``end`` (default now) under today's shares and under today's
    with ``proposed`` (``node_key`` → percent of the parent) laid over them;
    ``on_first_replay`` is called between the two (progress)."""
    end = end or timezone.now()
    days = max(1, min(int(days), MAX_DAYS))
    start = end - timedelta(days=days)
    window = float(settings.SCHEDULER_WINDOW_SECONDS)
    past = ledger_trace(cluster=cluster, start=start, end=end, window_seconds=window, now=end)
    tree = tree_rows(cluster=cluster)
    today = shares_at(cluster=cluster, at=end)
    trees = [budget_from(tree, today), budget_from(tree, {**today, **proposed})]
    config = ReplayConfig(
        gpus=cluster.nodes * cluster.gpus_per_node,
        gpus_per_node=cluster.gpus_per_node,
        policy=settings.SCHEDULER_POLICY,
        window_seconds=window,
        record_runs=False,
    )
    if not past.trace.jobs:
        return WhatIf(
            start=start,
            end=end,
            gpus=config.gpus,
            gpus_per_node=config.gpus_per_node,
            jobs=0,
            counts=past.counts,
            summary="No workload of this cluster in the window: there is nothing to replay.",
        )
    figures = []
    for budget in trees:
        figures.append(_team_figures(_replayed(past, budget_of(budget.root), config)))
        if on_first_replay is not None and len(figures) == 1:
            on_first_replay()
    projects = sorted(set(figures[0]) | set(figures[1]))
    empty = _empty()
    ids = {trees[0].key(pid): pid for pid, _, _ in tree.projects}
    names = dict(Project.objects.filter(id__in=ids.values()).values_list("id", "name"))
    teams = [
        TeamEffect(
            p,
            figures[0].get(p, empty),
            figures[1].get(p, empty),
            project_id=ids.get(p),
            name=names.get(ids.get(p), p),
        )
        for p in projects
    ]
    return WhatIf(
        start=start,
        end=end,
        gpus=config.gpus,
        gpus_per_node=config.gpus_per_node,
        jobs=len(past.trace.jobs),
        counts=past.counts,
        teams=teams,
        summary=summary_of(teams),
    )


def _replayed(past: LedgerTrace, budget: Budget, config: ReplayConfig) -> ReplayResult:
    return replay(past.trace, budget, config, prior_usage=past.prior)


def _empty() -> TeamFigures:
    return TeamFigures(0.0, 0.0, 0.0, None, None, None, None, None, None, None, 0)


def _team_figures(result: ReplayResult) -> dict[str, TeamFigures]:
    """Per team: owed and delivered over the submit window (``compute_metrics``), the waits
    of its debug-class and other work (every first start, censored at the window's end) and
    the preemptions its work suffered."""
    metrics = compute_metrics(result)["submit_window"]
    period_end = metrics["end_time"]
    waits: dict[tuple[str, bool], list[float]] = defaultdict(list)
    preempted: dict[str, int] = defaultdict(int)
    for job in result.jobs:
        if job.submit > period_end:
            continue
        started = job.first_start if job.first_start is not None else period_end
        waits[(job.project, job.debug)].append(min(started, period_end) - job.submit)
        preempted[job.project] += job.preemptions
    figures = {}
    for team in metrics["teams"]:
        p = team["project"]
        debug, other = waits.get((p, True), []), waits.get((p, False), [])
        figures[p] = TeamFigures(
            owed_gpu_hours=team["owed_gpu_hours"],
            delivered_gpu_hours=team["charged_gpu_hours"],
            delivered_of_owed_gpu_hours=team["hourly_delivered_gpu_hours"],
            delivery_ratio=team["delivery_ratio"],
            hourly_delivery_ratio=team["hourly_delivery_ratio"],
            wait_p90=percentile(debug + other, 90),
            debug_wait_p50=percentile(debug, 50),
            debug_wait_p90=percentile(debug, 90),
            other_wait_p50=percentile(other, 50),
            other_wait_p90=percentile(other, 90),
            preemptions=preempted[p],
        )
    return figures


def summary_of(teams: list[TeamEffect]) -> str:
    """What changes most, in a sentence: the team whose delivered-of-owed GPU-hours change
    most, the largest relative change of a team's p90 wait (all its work), and the largest
    change of a team's hourly delivery (when another team's)."""
    parts = []
    delivered = _largest(teams, lambda f: f.delivered_of_owed_gpu_hours, relative=False)
    if delivered is not None:
        team, before, after = delivered
        parts.append(
            f"{_name(team)} would get {after:,.1f} GPU-hours of what it is owed "
            f"instead of {before:,.1f}"
        )
    wait = _largest(teams, lambda f: f.wait_p90, relative=True)
    if wait is not None:
        team, before, after = wait
        if not before:
            parts.append(
                f"{_name(team)} would wait longer (p90 from 0 to {format_duration(after)})"
            )
        else:
            way = "less" if after < before else "more"
            change = abs(after - before) / before
            parts.append(
                f"{_name(team)} would wait {change:.0%} {way} "
                f"(p90 {format_duration(before)} → {format_duration(after)})"
            )
    hourly = _largest(teams, lambda f: f.hourly_delivery_ratio, relative=False)
    if hourly is not None and (delivered is None or hourly[0] is not delivered[0]):
        team, before, after = hourly
        way = "rises" if after > before else "falls"
        parts.append(f"{_name(team)}'s hourly delivery {way} from {before:.0%} to {after:.0%}")
    return "; ".join(parts) + "." if parts else "Nothing changes for any team."


def _largest(teams: list[TeamEffect], figure, *, relative: bool):
    """``(team, today, proposed)`` of the team whose ``figure`` changes most (relative to
    the larger of the two when ``relative``); None when no team's changes (to 0.01)."""
    best, size = None, 0.0
    for team in teams:
        before, after = figure(team.today), figure(team.proposed)
        if before is None or after is None or round(after - before, 2) == 0:
            continue
        change = abs(after - before) / (max(abs(before), abs(after)) if relative else 1)
        if change > size:
            best, size = (team, before, after), change
    return best


def _name(team: TeamEffect) -> str:
    return team.name or team.project


def teams_shown(
    teams: list[TeamEffect], visible_project_ids: set[int] | None
) -> tuple[list[TeamEffect], TeamEffect | None]:
    """The teams a viewer sees one by one (``visible_project_ids``; None: all), and the rest
    summed into one "Other teams" row (None when there is no rest): GPU-hours add up, ratios
    are recomputed from the sums, waits of teams the viewer may not see are not shown."""
    if visible_project_ids is None:
        return teams, None
    shown = [t for t in teams if t.project_id in visible_project_ids]
    rest = [t for t in teams if t.project_id not in visible_project_ids]
    if not rest:
        return shown, None
    other = TeamEffect(
        project="",
        today=_summed([t.today for t in rest]),
        proposed=_summed([t.proposed for t in rest]),
        name=f"Other teams ({len(rest)})",
    )
    return shown, other


def _summed(figures: list[TeamFigures]) -> TeamFigures:
    owed = sum(f.owed_gpu_hours for f in figures)
    delivered = sum(f.delivered_gpu_hours for f in figures)
    of_owed = sum(f.delivered_of_owed_gpu_hours for f in figures)
    # Each team's own min(delivered, owed), as the organization's figure sums them.
    ratio = (
        sum(min(f.delivered_gpu_hours, f.owed_gpu_hours) for f in figures) / owed if owed else None
    )
    hourly = of_owed / owed if owed else None
    preemptions = sum(f.preemptions for f in figures)
    return TeamFigures(
        owed, delivered, of_owed, ratio, hourly, None, None, None, None, None, preemptions
    )


@dataclass(frozen=True)
class WhatIfShown:
    """What one viewer sees of a stored what-if: their teams, the rest summed, the sentence
    about their teams."""

    teams: list[TeamEffect]
    other: TeamEffect | None
    summary: str


def whatif_shown(result: dict, visibility, organization_id: int) -> WhatIfShown:
    """A stored what-if (``WhatIfRun.result``) as ``visibility`` may see it: every team for
    whoever sees the whole organization, else the projects they see and one row for the
    rest (``teams_shown``)."""
    teams = [
        TeamEffect(
            project=t["project"],
            today=TeamFigures(**t["today"]),
            proposed=TeamFigures(**t["proposed"]),
            project_id=t["project_id"],
            name=t["name"],
        )
        for t in result.get("teams", [])
    ]
    if visibility.sees_whole_organization(organization_id):
        visible = None
    else:
        visible = set(visibility.projects().values_list("id", flat=True))
    shown, other = teams_shown(teams, visible)
    if not teams:
        return WhatIfShown([], None, result.get("summary", ""))
    return WhatIfShown(shown, other, summary_of(shown))
