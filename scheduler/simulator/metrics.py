"""Figures of a replay, with the words of ``docs/design.md`` ("Words").

For each project and hour ``h`` (GPU-seconds): *entitled* = effective share x healthy GPUs x
the part of the hour inside the period; *demand* = GPUs of its pending and running workloads,
integrated over the hour; *owed* = min(entitled, demand); *charged* = GPU time of its runs with
a minimum runtime above 0; *burst* = charged above entitled; *free* = free-lane GPU time.

- Delivery ratio of a team = min(Σ charged, Σ owed) ÷ Σ owed; org-wide
  Σ_teams min(charged, owed) ÷ Σ owed (Ai2's figure: catch-up later in the period counts).
- Hourly delivery ratio = Σ_hours min(charged_h, owed_h) ÷ Σ owed (no catch-up).
- Occupancy = allocated GPU time ÷ healthy GPU time; also over only the hours in which
  demand (pending + running GPUs) was at least the cluster's size (*oversubscribed*).
- Unbudgeted fraction = (free lane + burst, which includes all of an unbudgeted project's
  usage) ÷ all GPU time used.
- Queue wait = first start - submit (``all``, ``debug``, ``other``); ``requeue``: every wait of
  a preempted job from its eviction to its next start; ``every``: both kinds together, so a
  policy that starts work at once and then evicts it cannot hide the waits it causes.
- Idle GPU-hours = charged GPU time of runs while idle by the replay's rule (a job whose
  trace utilization is below 5 %, from the later of its protection's end and 30 minutes into
  the run, to the run's end); jobs of unknown utilization count nothing, and
  ``jobs_with_utilization`` says how many jobs had one.

Every figure is given over the whole replay (first submission to last completion) and over
the *submit window* (first submission to the end of the hour of the last submission), where
jobs still waiting at the window's end count with their wait so far (a lower bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from scheduler.simulator.ledger import HOUR
from scheduler.simulator.replay import ReplayResult


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values``, interpolating linearly between ranks
    (NumPy's default method); ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def wait_summary(waits: Sequence[float]) -> dict[str, float | None]:
    """``{p50, p90, mean}`` of queue waits in seconds (``None`` when there are none)."""
    if not waits:
        return {"p50": None, "p90": None, "mean": None, "count": 0}
    return {
        "p50": _r(percentile(waits, 50), 1),
        "p90": _r(percentile(waits, 90), 1),
        "mean": _r(sum(waits) / len(waits), 1),
        "count": len(waits),
    }


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _ratio(num: float, den: float) -> float | None:
    return None if den <= 0 else num / den


def compute_metrics(result: ReplayResult) -> dict:
    """The ``metrics.json`` object of one replay (see the module docstring for definitions)."""
    whole = _period_figures(result, result.end_time, censor=False)
    window_end = min(
        result.end_time,
        result.ledger.hour0
        + (math.floor((result.last_submit - result.ledger.hour0) / HOUR) + 1) * HOUR,
    )
    window = _period_figures(result, window_end, censor=True)
    window["end_time"] = window_end
    simulated = result.end_time - result.start_time
    metrics = {
        "policy": result.policy,
        "jobs": len(result.jobs),
        "gpus": result.config.gpus,
        "gpus_per_node": result.config.gpus_per_node,
        "wall_seconds": round(result.wall_seconds, 3),
        "simulated_seconds": round(simulated, 1),
        "jobs_per_second": round(len(result.jobs) / result.wall_seconds, 1)
        if result.wall_seconds > 0
        else None,
        "cycles": result.cycles,
        "tick_cycles": result.tick_cycles,
        "skipped_jobs": len(result.skipped),
        "skipped_job_ids": [j.id for j in result.skipped[:20]],
        "duplicates_kept": result.duplicates,
        "jobs_with_utilization": sum(1 for j in result.jobs if j.utilization is not None),
        "never_started": sum(1 for j in result.jobs if j.first_start is None),
        "never_started_ids": [j.id for j in result.jobs if j.first_start is None],
        "start_time": result.start_time,
        "last_submit_time": result.last_submit,
        "end_time": result.end_time,
        **whole,
        "submit_window": window,
    }
    return metrics


@dataclass
class _JobFigures:
    """What the jobs submitted in a period say: counts, waits and idle GPU time."""

    jobs_by_project: dict[str, int]
    waits_by_project: dict[str, list[float]]
    idle_by_project: dict[str, float]
    all_waits: list[float] = field(default_factory=list)
    debug_waits: list[float] = field(default_factory=list)
    other_waits: list[float] = field(default_factory=list)
    requeue_waits: list[float] = field(default_factory=list)
    gang_waits: list[float] = field(default_factory=list)
    whole_node_waits: list[float] = field(default_factory=list)


class _Oversubscribed(NamedTuple):
    """The hours in which demand reached the cluster's size, and their GPU time."""

    hours: list[int]
    used: float
    healthy: float


@dataclass
class _TeamTotals:
    """Sums over every team of a period (GPU-seconds)."""

    owed: float = 0.0
    delivered: float = 0.0  # Σ min(charged, owed)
    hourly_delivered: float = 0.0  # Σ over hours of min(charged_h, owed_h)
    used: float = 0.0
    free: float = 0.0
    burst: float = 0.0


def _hour_spans(result: ReplayResult, period_end: float) -> list[float]:
    """Seconds of each ledger hour inside [start of the replay, ``period_end``]."""
    ledger = result.ledger
    spans: list[float] = []
    for h in range(ledger.hours):
        if h > 0 and ledger.hour_start(h) >= period_end:
            break
        lo = max(ledger.hour_start(h), result.start_time)
        hi = min(ledger.hour_start(h) + HOUR, period_end)
        spans.append(max(0.0, hi - lo))
    return spans


def _oversubscription(result: ReplayResult, spans: list[float]) -> _Oversubscribed:
    """Hours in which the teams together asked for at least the whole cluster: there,
    anything short of full occupancy is the scheduler's doing (fragmentation, holds,
    gangs), not a lack of work. Ai2's 98 % is quoted at 2-3x over-demand."""
    ledger = result.ledger
    gpus = result.config.gpus
    n_proj = len(ledger.projects)
    over_hours = [
        h
        for h in range(len(spans))
        if spans[h] > 0
        and sum(ledger.demand[i][h] for i in range(n_proj)) >= gpus * spans[h] - 1e-6
    ]
    over_used = sum(
        ledger.charged[i][h] + ledger.free[i][h] for h in over_hours for i in range(n_proj)
    )
    return _Oversubscribed(over_hours, over_used, gpus * sum(spans[h] for h in over_hours))


def oversubscribed_spans(result: ReplayResult, period_end: float) -> list[tuple[float, float]]:
    """The stretches of consecutive over-demanded hours up to ``period_end``, as (start, end)
    times: the hours ``occupancy_when_oversubscribed`` is taken over."""
    spans = _hour_spans(result, period_end)
    ledger = result.ledger
    stretches: list[tuple[float, float]] = []
    for h in _oversubscription(result, spans).hours:
        start, end = ledger.hour_start(h), ledger.hour_start(h) + HOUR
        if stretches and stretches[-1][1] == start:
            stretches[-1] = (stretches[-1][0], end)
        else:
            stretches.append((start, end))
    return stretches


def hold_kind(nodes: int, gpus: int, gpus_per_node: int) -> str | None:
    """``"gang"`` (more than one node), ``"whole_node"`` (a single-node workload that needs a
    whole node) or None: the work holds are for, which packing small work around it can
    starve."""
    if nodes > 1:
        return "gang"
    return "whole_node" if gpus >= gpus_per_node else None


def _job_figures(result: ReplayResult, period_end: float, *, censor: bool) -> _JobFigures:
    """Jobs, waits and idle GPU time of the jobs submitted by ``period_end``; with
    ``censor``, waits still open at the period's end count up to it."""
    projects = result.ledger.projects
    per_node = result.config.gpus_per_node
    figures = _JobFigures(
        jobs_by_project=dict.fromkeys(projects, 0),
        waits_by_project={p: [] for p in projects},
        idle_by_project=dict.fromkeys(projects, 0.0),
    )
    for rec in result.jobs:
        if rec.submit > period_end:
            continue
        figures.jobs_by_project[rec.project] += 1
        for idle_from, idle_to, idle_gpus in rec.idle_spans:
            if idle_from < period_end:
                figures.idle_by_project[rec.project] += (
                    min(idle_to, period_end) - idle_from
                ) * idle_gpus
        if rec.first_start is not None and rec.first_start <= period_end:
            wait = rec.first_start - rec.submit
        elif censor:
            wait = period_end - rec.submit
        else:
            continue
        figures.waits_by_project[rec.project].append(wait)
        figures.all_waits.append(wait)
        (figures.debug_waits if rec.debug else figures.other_waits).append(wait)
        # The first waits of the work holds are for (also in ``all``).
        kind = hold_kind(rec.nodes, rec.gpus, per_node)
        if kind == "gang":
            figures.gang_waits.append(wait)
        elif kind == "whole_node":
            figures.whole_node_waits.append(wait)
        for requeued, restarted in rec.requeues:
            if requeued > period_end:
                break
            if restarted is not None and restarted <= period_end:
                figures.requeue_waits.append(restarted - requeued)
            elif censor:
                figures.requeue_waits.append(period_end - requeued)
    return figures


def _team_row(
    result: ReplayResult,
    i: int,
    spans: list[float],
    jobs: _JobFigures,
    totals: _TeamTotals,
) -> dict:
    """The figures of the ledger's ``i``-th project over ``spans``; adds its sums to
    ``totals``."""
    ledger = result.ledger
    project = ledger.projects[i]
    share = result.shares.get(project, 0.0)
    entitled = share * result.config.gpus
    charged_h = ledger.charged[i]
    free_h = ledger.free[i]
    demand_h = ledger.demand[i]
    owed = charged = hourly_min = burst = free = 0.0
    for h in range(len(spans)):
        # Periods end at the replay's end or on an hour boundary, so buckets are whole.
        ent = entitled * spans[h]
        ch = charged_h[h]
        owed_h = min(ent, demand_h[h])
        owed += owed_h
        charged += ch
        hourly_min += min(ch, owed_h)
        burst += max(0.0, ch - ent)
        free += free_h[h]
    totals.owed += owed
    totals.delivered += min(charged, owed)
    totals.hourly_delivered += hourly_min
    totals.used += charged + free
    totals.free += free
    totals.burst += burst
    return {
        "project": project,
        "share": _r(share * 100.0, 4),
        "budgeted": project in result.shares,
        "entitled_gpus": _r(entitled, 2),
        "owed_gpu_hours": _r(owed / HOUR, 2),
        "charged_gpu_hours": _r(charged / HOUR, 2),
        "burst_gpu_hours": _r(burst / HOUR, 2),
        "free_gpu_hours": _r(free / HOUR, 2),
        "delivery_ratio": _r(_ratio(min(charged, owed), owed)),
        "hourly_delivery_ratio": _r(_ratio(hourly_min, owed)),
        # Σ over hours of min(charged, owed): what was delivered of what was owed.
        "hourly_delivered_gpu_hours": _r(hourly_min / HOUR, 2),
        "jobs": jobs.jobs_by_project[project],
        "queue_wait_p90_seconds": _r(percentile(jobs.waits_by_project[project], 90), 1),
        "idle_gpu_hours": _r(jobs.idle_by_project[project] / HOUR, 2),
    }


def _worst_teams(teams: list[dict]) -> dict:
    """The budgeted teams served worst (over the period and hour by hour) and how many
    teams reached 95 %."""
    judged = [t for t in teams if t["budgeted"] and t["delivery_ratio"] is not None]
    worst = min(judged, key=lambda t: (t["delivery_ratio"], t["project"]), default=None)
    worst_hourly = min(
        judged, key=lambda t: (t["hourly_delivery_ratio"], t["project"]), default=None
    )
    return {
        "worst_team": worst["project"] if worst else None,
        "worst_team_delivery_ratio": worst["delivery_ratio"] if worst else None,
        "worst_team_hourly": worst_hourly["project"] if worst_hourly else None,
        "worst_team_hourly_delivery_ratio": worst_hourly["hourly_delivery_ratio"]
        if worst_hourly
        else None,
        "teams_at_least_95pct": sum(1 for t in judged if t["delivery_ratio"] >= 0.95),
        "teams_judged": len(judged),
    }


def _period_figures(result: ReplayResult, period_end: float, *, censor: bool) -> dict:
    """Figures over [start of the replay, ``period_end``]."""
    spans = _hour_spans(result, period_end)
    healthy = result.config.gpus * sum(spans)
    over = _oversubscription(result, spans)
    jobs = _job_figures(result, period_end, censor=censor)
    totals = _TeamTotals()
    teams = [_team_row(result, i, spans, jobs, totals) for i in range(len(result.ledger.projects))]
    in_period = [p for p in result.preemptions if p.time <= period_end]
    worst = _worst_teams(teams)
    return {
        "occupancy": _r(_ratio(totals.used, healthy)),
        "occupancy_when_oversubscribed": _r(_ratio(over.used, over.healthy)),
        "oversubscribed_hours": len(over.hours),
        "delivery_ratio": _r(_ratio(totals.delivered, totals.owed)),
        "hourly_delivery_ratio": _r(_ratio(totals.hourly_delivered, totals.owed)),
        **worst,
        "unbudgeted_fraction": _r(_ratio(totals.free + totals.burst, totals.used)),
        "owed_gpu_hours": _r(totals.owed / HOUR, 2),
        "used_gpu_hours": _r(totals.used / HOUR, 2),
        "preemptions": len(in_period),
        "lost_gpu_hours": _r(sum(p.lost_gpu_seconds for p in in_period) / HOUR, 2),
        "idle_gpu_hours": _r(sum(jobs.idle_by_project.values()) / HOUR, 2),
        "lost_fraction_of_charged": _r(
            _ratio(sum(p.lost_gpu_seconds for p in in_period), totals.used - totals.free)
        ),
        "queue_wait_seconds": {
            "all": wait_summary(jobs.all_waits),
            "debug": wait_summary(jobs.debug_waits),
            "other": wait_summary(jobs.other_waits),
            "requeue": wait_summary(jobs.requeue_waits),
            "every": wait_summary(jobs.all_waits + jobs.requeue_waits),
            "gang": wait_summary(jobs.gang_waits),
            "whole_node": wait_summary(jobs.whole_node_waits),
        },
        "teams": teams,
    }
