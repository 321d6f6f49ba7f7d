"""A past for the demo: weeks of the bundled Philly trace, replayed by the engine into the ledger.

A new installation would otherwise open on empty charts: no usage, no fair-share history, no
report for last month. ``demo_history_build`` takes ``days`` of the trace, replays them
through the simulator — the same engine and policy as the live loop, on the demo cluster's
nodes and the demo budget tree — and stores what happened as if the live loop had done it:
workloads, their runs (placements, preemptions and by whom), then the usage ledger and
entitlement through the live loop's own accounting passes, hour by hour, and the GPUs' use by
the simulated executor's rule (``utilization_model.py``). The replay stops at
*now*: work running then is running in the database, on the same nodes, and work still
waiting is pending, so the live loop and the demo replay (``demo.py``) continue from there on
one clock (the trace's own time, shifted so the window ends now).

Which weeks: the window of whole days whose GPU-hours asked are closest to
``TARGET_DEMAND`` times the cluster's (a busy cluster, not an idle or hopeless one). One job
in ten is free-lane work, as in the live demo replay; the contract is the simulator's rule.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from governance.models import Allocation, Cluster, CostRate, Project
from scheduler.choices import RunEndReason, RunLane, WorkloadState
from scheduler.executors.demo import FREE_LANE_EVERY, TRACE, _shape, philly_jobs
from scheduler.executors.simulated import simulated_nodes_ensure
from scheduler.executors.simulated_utilization import utilization_history_rows
from scheduler.models import AccountingCursor, Node, NodeAgent, Run, RunNode, Workload
from scheduler.services.simulations import live_budget_tree
from scheduler.services.usage import usage_account_history
from scheduler.simulator.replay import ReplayConfig, replay
from scheduler.simulator.traces import Trace, TraceJob

HISTORY_DAYS = 28
TARGET_DEMAND = 1.1
# The demo's price of a GPU-hour, so finance sees costs (a list price of the order of
# cloud H100s; any site sets its own on the admin pages).
DEMO_RATE = Decimal("2.40")
DAY = 86400.0


@dataclass
class HistoryReport:
    """What ``demo_history_build`` stored, and how long each part took (seconds)."""

    start: datetime
    end: datetime
    workloads: int = 0
    runs: int = 0
    running: int = 0
    pending: int = 0
    preemptions: int = 0
    ledger_rows: int = 0
    utilization_rows: int = 0
    timings: dict[str, float] = dataclasses.field(default_factory=dict)


def history_window(jobs: tuple[TraceJob, ...], gpus: int, days: int) -> tuple[float, float]:
    """``[start, end)`` in trace time: the ``days``-long window starting on a whole day of the
    trace whose asked GPU-hours are closest to ``TARGET_DEMAND`` x the cluster's (the
    earliest of equally close ones). A job's GPU-hours count at its submit time."""
    first, last = jobs[0].submit_time, jobs[-1].submit_time
    span = days * DAY
    times = [j.submit_time for j in jobs]
    work = [0.0]
    for job in jobs:
        work.append(work[-1] + (job.gpus * job.duration if job.gpus <= gpus else 0.0))
    best, best_gap = first, None
    offset = 0.0
    while first + offset + span <= last or best_gap is None:
        start = first + offset
        a, b = bisect.bisect_left(times, start), bisect.bisect_left(times, start + span)
        demand = (work[b] - work[a]) / (gpus * span)
        gap = abs(demand - TARGET_DEMAND)
        if best_gap is None or gap < best_gap:
            best, best_gap = start, gap
        offset += DAY
        if first + offset + span > last:
            break
    return best, best + span


def demo_history_build(
    *,
    cluster: Cluster,
    days: int = HISTORY_DAYS,
    now: datetime | None = None,
    progress: Callable[[str], None] | None = None,
) -> HistoryReport | None:
    """Give ``cluster`` ``days`` of replayed past ending at ``now``; None if it has a past.

    Only on a cluster that has never run anything (no workload, no accounting): history is
    never rewritten. Everything is written in one transaction.
    """
    now = now or timezone.now()
    say = progress or (lambda _text: None)
    if (
        Workload.objects.filter(cluster=cluster).exists()
        or AccountingCursor.objects.filter(cluster=cluster).exists()
    ):
        return None
    clock = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal clock
        timings[name] = round(time.perf_counter() - clock, 2)
        clock = time.perf_counter()

    jobs = philly_jobs()
    index_of = {job.id: i for i, job in enumerate(jobs)}
    projects = {
        p.slug: p for p in Project.objects.filter(program__organization=cluster.organization)
    }
    gpus = cluster.nodes * cluster.gpus_per_node
    t_start, t_end = history_window(jobs, gpus, days)
    chosen = _chosen_jobs(jobs, cluster, projects, t_start, t_end)
    trace = Trace(jobs=chosen, format="philly", projects=sorted({j.project for j in chosen}))
    offset = now.timestamp() - t_end

    def real(t: float) -> datetime:
        return datetime.fromtimestamp(t + offset, UTC)

    say(f"replaying {len(chosen):,} Philly jobs of {days} days through the engine")
    # The engine schedules with the shares the organization had at each moment (the same
    # tree the live loop and the accounting read), so owed and delivered match in history.
    result = replay(
        trace,
        live_budget_tree(cluster=cluster, at=real(t_start)),
        ReplayConfig(
            gpus=gpus, gpus_per_node=cluster.gpus_per_node, policy="fairshare", until=t_end
        ),
        budget_changes=[
            (at.timestamp() - offset, live_budget_tree(cluster=cluster, at=at))
            for at in _share_changes(cluster, real(t_start), now)
        ],
    )
    lap("replay")

    report = HistoryReport(start=real(t_start), end=now)
    with transaction.atomic():
        nodes = _nodes_alive(cluster, real(t_start), now)
        say(f"storing {len(result.jobs):,} workloads and their runs")
        workloads = _store_workloads(cluster, result, projects, index_of, jobs, real, t_end)
        runs = _store_runs(cluster, result, workloads, nodes, real, t_end)
        lap("store")
        _count(report, workloads, runs)
        say("charging the ledger hour by hour")
        report.ledger_rows = usage_account_history(
            cluster=cluster, runs=runs, demand_at=_demand(workloads.values()), until=now
        )
        lap("ledger")
        say("measuring the GPUs' use by the simulated executor's rule")
        report.utilization_rows = utilization_history_rows(cluster=cluster, runs=runs)
        lap("utilization")
        _demo_rate_ensure(cluster, report.start)
    from governance.services.reports import usage_days_refresh

    usage_days_refresh(cluster=cluster)
    lap("daily cache")
    report.timings = timings
    return report


def _chosen_jobs(jobs, cluster, projects, t_start: float, t_end: float) -> list[TraceJob]:
    """The trace's jobs submitted in [t_start, t_end) to a project the organization has and
    fitting the cluster; one in ten (by trace position) in the free lane."""
    chosen = []
    for i, job in enumerate(jobs):
        if not t_start <= job.submit_time < t_end or job.project not in projects:
            continue
        if _shape(job, cluster) is None:
            continue
        free = i % FREE_LANE_EVERY == 0
        chosen.append(dataclasses.replace(job, min_runtime=0.0) if free else job)
    return chosen


def _nodes_alive(cluster: Cluster, start: datetime, now: datetime) -> list[Node]:
    """The simulated nodes (registered at ``start``), by name, with a heartbeat at ``now``:
    they lived through the history, or the first heartbeat check would mark them all down
    and end the work running on them."""
    nodes = sorted(simulated_nodes_ensure(cluster=cluster, now=start), key=lambda n: n.name)
    Node.objects.filter(pk__in=[n.pk for n in nodes]).update(last_heartbeat=now)
    NodeAgent.objects.filter(node__in=nodes).update(last_seen_at=now)
    return nodes


def _count(report: HistoryReport, workloads: dict, runs: list[Run]) -> None:
    """Fill ``report``'s counts of what was stored."""
    report.workloads, report.runs = len(workloads), len(runs)
    states = [w.state for w in workloads.values()]
    report.running = states.count(WorkloadState.RUNNING)
    report.pending = states.count(WorkloadState.PENDING)
    report.preemptions = sum(r.end_reason == RunEndReason.PREEMPTED for r in runs)


def _demo_rate_ensure(cluster: Cluster, start: datetime) -> None:
    """A price for the cluster's GPU type (the demo's), unless one exists."""
    if not CostRate.objects.filter(gpu_type=cluster.gpu_type).exists():
        CostRate.objects.create(
            gpu_type=cluster.gpu_type,
            rate_per_gpu_hour=DEMO_RATE,
            currency="USD",
            valid_from=start - timedelta(days=31),
            note="Demo rate",
        )


def _share_changes(cluster: Cluster, start: datetime, end: datetime) -> list[datetime]:
    """Every moment in (``start``, ``end``] at which a share of ``cluster`` began or ended."""
    rows = Allocation.objects.filter(cluster=cluster).values_list("valid_from", "valid_to")
    moments = {t for row in rows for t in row if t is not None and start < t <= end}
    return sorted(moments)


def _store_workloads(cluster, result, projects, index_of, jobs, real, t_end) -> dict:
    """One workload per replayed job, in trace order (so the demo replay continues after the
    last); returns them by trace job id."""
    origin = jobs[0].submit_time + (real(t_end).timestamp() - t_end)
    ended_runs: dict[int, list] = defaultdict(list)
    for run in result.runs:
        ended_runs[run.job].append(run)
    rows = []
    for k, rec in sorted(enumerate(result.jobs), key=lambda kr: index_of[kr[1].id]):
        index = index_of[rec.id]
        job = jobs[index]
        if rec.end is not None and rec.end <= t_end:
            state, changed, declared = WorkloadState.SUCCEEDED, real(rec.end), rec.duration
        else:
            # The work left as the live executor counts it: a resumable job keeps the time
            # its ended runs ran, so declare that plus what the replay says is left.
            done = sum(r.end - r.start for r in ended_runs[k]) if rec.resumable else 0.0
            declared = done + rec.remaining
            if rec.run_start is not None:
                state, changed = WorkloadState.RUNNING, real(rec.run_start)
            else:
                state = WorkloadState.PENDING
                changed = real(rec.requeues[-1][0] if rec.requeues else rec.submit)
        rows.append(
            Workload(
                project=projects[rec.project],
                cluster=cluster,
                name=f"{TRACE} #{job.line} ({rec.gpus} GPU{'s' if rec.gpus > 1 else ''})",
                gpus=rec.gpus,
                nodes=rec.nodes,
                min_runtime_seconds=round(rec.min_runtime),
                resumable=rec.resumable,
                launch_spec={
                    "trace": TRACE,
                    "trace_index": index,
                    "trace_line": job.line,
                    "replay_origin": origin,
                },
                declared_duration_seconds=max(1, round(declared)),
                state=state,
                submitted_at=real(rec.submit),
                first_started_at=real(rec.first_start) if rec.first_start is not None else None,
                finished_at=real(rec.end) if state == WorkloadState.SUCCEEDED else None,
                state_changed_at=changed,
            )
        )
    created = Workload.objects.bulk_create(rows, batch_size=2000)
    by_job = {}
    for rec, workload in zip(
        sorted(result.jobs, key=lambda r: index_of[r.id]), created, strict=True
    ):
        by_job[rec.id] = workload
    return by_job


def _store_runs(cluster, result, workloads, nodes, real, t_end) -> list[Run]:
    """Every run of the replay up to its end, and those running at its end (open)."""
    gpn = cluster.gpus_per_node
    by_preemption = {(p.job, p.time): p.by for p in result.preemptions}
    stretches: dict[int, list[tuple]] = defaultdict(list)
    for run in result.runs:
        stretches[run.job].append(
            (run.start, run.end, run.preempted, run.rows, run.protected_until)
        )
    for k, rec in enumerate(result.jobs):
        if rec.run_start is not None and not (rec.end is not None and rec.end <= t_end):
            stretches[k].append((rec.run_start, None, False, rec.run_rows, rec.run_protected_until))
    runs, placements = [], []
    for k, items in stretches.items():
        rec = result.jobs[k]
        workload = workloads[rec.id]
        for attempt, (start, end, preempted, rows, protected) in enumerate(sorted(items), start=1):
            per_node: dict[int, int] = defaultdict(int)
            for row in rows:
                per_node[row // gpn] += 1
            by = by_preemption.get((k, end)) if preempted else None
            ended = None if end is None else real(end)
            run = Run(
                workload=workload,
                attempt=attempt,
                project=workload.project,
                cluster=cluster,
                gpus=rec.gpus,
                lane=RunLane.FREE if rec.min_runtime <= 0 else RunLane.CHARGED,
                placement={nodes[i].name: n for i, n in sorted(per_node.items())},
                started_at=real(start),
                start_reason="started by the fair-share engine (replayed history)",
                protected_until=real(protected) if rec.min_runtime > 0 else None,
                ended_at=ended,
                end_reason=""
                if end is None
                else (RunEndReason.PREEMPTED if preempted else RunEndReason.SUCCEEDED),
                stop_requested_at=ended if preempted else None,
                stop_reason=RunEndReason.PREEMPTED if preempted else "",
                preempted_by=workloads.get(by) if by else None,
                accounted_until=real(start),
            )
            runs.append(run)
            placements.append(per_node)
    Run.objects.bulk_create(runs, batch_size=2000)
    RunNode.objects.bulk_create(
        [
            RunNode(run=run, node=nodes[i], gpus=n)
            for run, per_node in zip(runs, placements, strict=True)
            for i, n in sorted(per_node.items())
        ],
        batch_size=5000,
    )
    return runs


def _demand(workloads) -> Callable[[datetime], dict[int, int]]:
    """Charged GPUs asked per project at an instant (submitted and not finished), for
    increasing instants: a sweep over submits and finishes."""
    events = []
    for w in workloads:
        if not w.min_runtime_seconds:
            continue  # free-lane work asks for nothing owed (as in live accounting)
        events.append((w.submitted_at, w.project_id, w.gpus))
        if w.finished_at is not None:
            events.append((w.finished_at, w.project_id, -w.gpus))
    events.sort(key=lambda e: e[0])
    asked: dict[int, int] = defaultdict(int)
    position = 0

    def at(t: datetime) -> dict[int, int]:
        nonlocal position
        while position < len(events) and events[position][0] <= t:
            _, project_id, gpus = events[position]
            asked[project_id] += gpus
            position += 1
        return {p: g for p, g in asked.items() if g > 0}

    return at
