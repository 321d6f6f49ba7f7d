"""What-if: the last weeks of a cluster's real demand replayed under today's tree and under a
proposed one, team by team.

Both replays are the simulator's (``scheduler.simulator.replay``, the live engine's policy)
on the same trace (``ledger_trace``), the cluster's size and node shape, and the same usage
window before the trace; only the tree differs. Past demand is not future demand, and work
people did not submit because the queue was long is not in the trace: the page says so.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from governance.models import Cluster
from governance.selectors.tree import shares_at
from scheduler.engine import BudgetNode
from scheduler.selectors.budget import budget_from, tree_rows
from scheduler.selectors.ledger_trace import LedgerTrace, ledger_trace
from scheduler.simulator import Budget, ReplayConfig, replay
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
    """A team (the engine's ``program/project`` name) under today's tree and the proposal."""

    project: str
    today: TeamFigures
    proposed: TeamFigures


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
) -> WhatIf:
    """Replay the ``days`` before ``end`` (default now) under today's shares and under today's
    with ``proposed`` (``node_key`` → percent of the parent) laid over them."""
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
    figures = [_team_figures(_replayed(past, budget_of(b.root), config)) for b in trees]
    projects = sorted(set(figures[0]) | set(figures[1]))
    empty = _empty()
    teams = [TeamEffect(p, figures[0].get(p, empty), figures[1].get(p, empty)) for p in projects]
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
    """What changes most, in a sentence: the largest relative change of a team's p90 wait
    (all its work) and the largest change of a team's hourly delivery."""
    parts = []
    wait = max(
        ((t, *_p90s(t)) for t in teams if None not in _p90s(t) and max(_p90s(t)) > 0),
        key=lambda item: abs(item[2] - item[1]) / max(item[1], item[2]),
        default=None,
    )
    if wait is not None and wait[1] != wait[2]:
        team, before, after = wait
        change = abs(after - before) / before if before else None
        name = team.project.split("/")[-1]
        if change is None:
            parts.append(f"{name} would wait longer (p90 from 0 to {_hours(after)})")
        else:
            way = "less" if after < before else "more"
            parts.append(
                f"{name} would wait {change:.0%} {way} (p90 {_hours(before)} → {_hours(after)})"
            )
    hourly = max(
        (t for t in teams if t.today.hourly_delivery_ratio is not None and t.proposed.hourly_delivery_ratio is not None),
        key=lambda t: abs(t.proposed.hourly_delivery_ratio - t.today.hourly_delivery_ratio),
        default=None,
    )  # fmt: skip
    if (
        hourly is not None
        and hourly.today.hourly_delivery_ratio != hourly.proposed.hourly_delivery_ratio
    ):
        before, after = hourly.today.hourly_delivery_ratio, hourly.proposed.hourly_delivery_ratio
        way = "rises" if after > before else "falls"
        name = hourly.project.split("/")[-1]
        parts.append(f"{name}'s hourly delivery {way} from {before:.0%} to {after:.0%}")
    return "; ".join(parts) + "." if parts else "Nothing changes for any team."


def _p90s(team: TeamEffect) -> tuple[float | None, float | None]:
    return team.today.wait_p90, team.proposed.wait_p90


def _hours(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"
