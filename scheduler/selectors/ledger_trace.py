"""The workloads a cluster ran over a past window, as a trace the simulator replays.

What a what-if replays: the same demand through the same engine under another tree. Each
workload submitted in ``[start, end)`` becomes one ``TraceJob`` — submit time, GPUs, minimum
runtime, resumable, project (the engine's ``program/project`` name), submitter — with the
run time it really needed (``needed_seconds``):

- **finished** (succeeded or failed): a resumable workload needed the time all its runs ran
  (work lost to a preemption after the last checkpoint is counted as needed: the ledger
  does not say how much it was); a non-resumable one needed its last run, which started
  from the beginning and got to the end;
- **cancelled**: what it ran before it was cancelled; one cancelled before it ever ran asked
  for nothing that can be replayed and is left out;
- **still live** (running, waiting, or stopped to be requeued): the longer of what
  it has run so far and its declared duration; one that never ran and declared no duration
  is left out (its need is unknown).

``LedgerTrace.counts`` says how many workloads went each way. What the trace cannot hold:
work people did not submit because the queue was long, and a workload's node count (the
replay spreads a workload over nodes as the cluster's node size requires).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import F, Sum
from django.utils import timezone

from governance.models import Cluster
from scheduler.choices import WorkloadState
from scheduler.models import Run, UsageHour, Workload
from scheduler.selectors.budget import tree_rows
from scheduler.simulator.traces import Trace, TraceJob

HOUR = timedelta(hours=1)
FINISHED = (WorkloadState.SUCCEEDED, WorkloadState.FAILED)


@dataclass(frozen=True)
class PastWorkload:
    """One workload as the conversion reads it: its shape, its state at the window's end
    and its runs ``(started, ended or None)`` in attempt order."""

    id: int
    project: str
    submitted_at: datetime
    gpus: int
    min_runtime_seconds: int
    resumable: bool
    state: str
    declared_seconds: int | None
    submitter: str
    runs: tuple[tuple[datetime, datetime | None], ...] = ()


@dataclass
class LedgerTrace:
    """A window of a cluster's history as a trace, with how each workload was treated and
    the charged usage per project in the window's hours before ``start`` (``prior``: what
    the replay's usage window starts from, oldest hour first)."""

    trace: Trace
    start: datetime
    end: datetime
    counts: dict[str, int] = field(default_factory=dict)
    prior: dict[str, list[float]] = field(default_factory=dict)


def needed_seconds(workload: PastWorkload, now: datetime) -> tuple[float | None, str]:
    """The run time ``workload`` needed and how it was judged (the module's rule; a run
    still open has run until ``now``); ``None`` when it is left out of the trace."""
    spans = [((ended or now) - started).total_seconds() for started, ended in workload.runs]
    ran = sum(max(0.0, s) for s in spans)
    if workload.state in FINISHED:
        if not spans:
            return None, "left out: finished without a run"
        return (ran if workload.resumable else max(0.0, spans[-1])), "finished"
    if workload.state == WorkloadState.CANCELLED:
        return (ran, "cancelled after running") if spans else (None, "left out: never ran")
    declared = float(workload.declared_seconds or 0)
    if not spans and not declared:
        return None, "left out: waiting, no declared duration"
    return max(ran, declared), "still live"


def trace_of(workloads: list[PastWorkload], *, now: datetime, source: str) -> tuple[Trace, dict]:
    """``workloads`` as a trace (by submit time, then id) and the count of each treatment."""
    counts: dict[str, int] = defaultdict(int)
    jobs = []
    for w in sorted(workloads, key=lambda w: (w.submitted_at, w.id)):
        seconds, how = needed_seconds(w, now)
        counts[how] += 1
        if seconds is None:
            continue
        jobs.append(
            TraceJob(
                id=str(w.id),
                submit_time=w.submitted_at.timestamp(),
                duration=seconds,
                gpus=w.gpus,
                project=w.project,
                min_runtime=float(w.min_runtime_seconds),
                resumable=w.resumable,
                submitter=w.submitter,
            )
        )
    trace = Trace(
        jobs=jobs, format="ledger", source=source, projects=sorted({j.project for j in jobs})
    )
    return trace, dict(counts)


def ledger_trace(
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    window_seconds: float,
    now: datetime | None = None,
) -> LedgerTrace:
    """The workloads of ``cluster`` submitted in ``[start, end)`` as a ``LedgerTrace``, with
    the charged usage of the ``window_seconds`` before ``start`` (whole hours, as the
    replay's window counts them); ``now`` ends the runs still open (default: the clock).
    Three queries and one per 1,000 workloads' runs."""
    tree = tree_rows(cluster=cluster)
    program_slug = dict(tree.programs)
    key = {pid: f"{program_slug[program]}/{slug}" for pid, slug, program in tree.projects}
    rows = list(
        Workload.objects.filter(cluster=cluster, submitted_at__gte=start, submitted_at__lt=end)
        .order_by("submitted_at", "id")
        .values_list(
            "id", "project_id", "submitted_at", "gpus", "min_runtime_seconds", "resumable",
            "state", "declared_duration_seconds", "submitted_by_id",
        )
    )  # fmt: skip
    runs: dict[int, list] = defaultdict(list)
    ids = [row[0] for row in rows]
    for chunk in range(0, len(ids), 1000):
        for workload_id, started, ended in (
            Run.objects.filter(workload_id__in=ids[chunk : chunk + 1000])
            .order_by("workload_id", "attempt")
            .values_list("workload_id", "started_at", "ended_at")
        ):
            runs[workload_id].append((started, ended))
    past = [
        PastWorkload(
            id=wid, project=key.get(project_id, f"project-{project_id}"), submitted_at=submitted,
            gpus=gpus, min_runtime_seconds=min_runtime, resumable=resumable, state=state,
            declared_seconds=declared, submitter=str(user or ""), runs=tuple(runs[wid]),
        )
        for wid, project_id, submitted, gpus, min_runtime, resumable, state, declared, user in rows
    ]  # fmt: skip
    source = f"{cluster.name}, {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"
    # States and runs are read as they are now: a workload submitted in the window keeps
    # the whole time it needed, also the part after ``end``.
    trace, counts = trace_of(past, now=now or timezone.now(), source=source)
    return LedgerTrace(
        trace=trace,
        start=start,
        end=end,
        counts=counts,
        prior=_prior_usage(cluster, start, window_seconds, key),
    )


def _prior_usage(
    cluster: Cluster, start: datetime, window_seconds: float, key: dict[int, str]
) -> dict[str, list[float]]:
    """Charged GPU-seconds per project in each of the window's whole hours before the hour
    of ``start``, oldest first (``UsageLedger``'s ``prior``)."""
    first_hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    reach = max(1, math.ceil(window_seconds / 3600)) - 1
    since = first_hour - reach * HOUR
    prior: dict[str, list[float]] = {}
    for project_id, hour, charged in (
        UsageHour.objects.filter(cluster=cluster, hour__gte=since, hour__lt=first_hour)
        .values_list("project_id", "hour")
        .annotate(charged=Sum(F("budgeted_gpu_seconds") + F("burst_gpu_seconds")))
    ):
        hours = prior.setdefault(key.get(project_id, f"project-{project_id}"), [0.0] * reach)
        hours[(hour - since) // HOUR] += float(charged or 0)
    return prior
