"""The demo replay: the bundled Philly trace's jobs submitted into the demo organization.

Jobs arrive ``SIMULATED_EXECUTOR_SPEEDUP`` times faster than in the trace (1 by default: on
the trace's own clock), and their work is played at that speed by the simulated executor, so
the demo cluster fills, queues, preempts and drains like the real one did. After a replayed
history (``demo_history.py``) it carries on from the history's last job. Each job goes to the project whose slug is its Philly VC
(``load_demo`` creates them); jobs of VCs without a project, or larger than the cluster, are
skipped. Every job is submitted through ``workload_submit``, like a researcher's.

The scheduling contract comes from the simulator's rule (``ContractRule``: debug jobs 15 min,
others 2 h) with minimum runtimes divided by the speed-up like the clock;
one job in ten goes to the free lane (minimum 0), which shows preemption at work.

The replay starts where the trace gets busy (``busy_start``), not at its quiet first weeks,
with its first ``DEMO_REPLAY_WARM_START_JOBS`` (40) jobs due at once.
Stateless: the position in the trace and the replay's time origin are kept in each demo
workload's launch spec, so a restarted server carries on where it stopped. After a long stop
the replay does not rush to catch up: it resumes from now.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from functools import lru_cache

from django.conf import settings
from django.utils import timezone

from governance.models import Cluster, Project
from scheduler.choices import WorkloadState
from scheduler.executors.simulated import speedup
from scheduler.models import Workload
from scheduler.services.workloads import workload_submit
from scheduler.simulator.contract import ContractRule
from scheduler.simulator.traces import TraceJob, load_trace
from scheduler.traces import PHILLY_JOBS

TRACE = "philly"
FREE_LANE_EVERY = 10
# Behind schedule by more than this (the server was stopped): resume from now.
MAX_LAG = timedelta(minutes=5)


@lru_cache(maxsize=1)
def philly_jobs() -> tuple[TraceJob, ...]:
    """The bundled Philly jobs, sorted by submit time (read once per process)."""
    return tuple(load_trace(PHILLY_JOBS, "philly").jobs)


def busy_start(jobs: tuple[TraceJob, ...], per_day: int = 100) -> int:
    """Index of the first job from which ``per_day`` jobs arrive within a day.

    Real traces open with a quiet ramp-up (Philly: about 75 jobs in its first 20 days, which
    would be weeks of near silence); the demo starts where the cluster gets busy.
    """
    last = len(jobs) - 1
    for i, job in enumerate(jobs):
        if jobs[min(i + per_day - 1, last)].submit_time - job.submit_time <= 86400:
            return i
    return 0


def demo_workloads(cluster: Cluster):
    """Workloads the replay submitted on ``cluster``."""
    return Workload.objects.filter(cluster=cluster, launch_spec__trace=TRACE)


def demo_replay_step(
    *,
    cluster: Cluster,
    now: datetime | None = None,
    max_per_step: int | None = None,
    max_pending: int | None = None,
    jobs: tuple[TraceJob, ...] | None = None,
) -> int:
    """Submit the trace's jobs that are due by ``now``; return how many were submitted.

    At most ``max_per_step`` per call and none while ``max_pending`` demo workloads wait (so
    an idle browser tab never leaves a queue of thousands behind).
    """
    now = now or timezone.now()
    jobs = philly_jobs() if jobs is None else jobs
    if not jobs:
        return 0
    max_per_step = max_per_step or getattr(settings, "DEMO_REPLAY_MAX_PER_STEP", 20)
    max_pending = max_pending or getattr(settings, "DEMO_REPLAY_MAX_PENDING", 300)
    factor = speedup()
    ours = demo_workloads(cluster)
    if ours.filter(state=WorkloadState.PENDING).count() >= max_pending:
        return 0
    last = ours.order_by("-id").values_list("launch_spec", flat=True).first()
    start = busy_start(jobs)
    # A warm start: the first jobs are due at once, so the cluster is busy within seconds.
    warm_end = min(start + getattr(settings, "DEMO_REPLAY_WARM_START_JOBS", 40), len(jobs) - 1)
    if last is None:
        index = start
        origin = now.timestamp() - (jobs[warm_end].submit_time - jobs[0].submit_time) / factor
    else:
        index, origin = last["trace_index"] + 1, last["replay_origin"]
    projects = {
        p.slug: p for p in Project.objects.filter(program__organization=cluster.organization)
    }
    rule = ContractRule()
    start = jobs[0].submit_time
    submitted = 0
    while index < len(jobs) and submitted < max_per_step:
        job = jobs[index]
        due = origin + (job.submit_time - start) / factor
        if due > now.timestamp():
            break
        if index > warm_end and now.timestamp() - due > MAX_LAG.total_seconds():
            origin = now.timestamp() - (job.submit_time - start) / factor
        shape = _shape(job, cluster)
        project = projects.get(job.project)
        if shape is not None and project is not None:
            gpus, nodes = shape
            free = index % FREE_LANE_EVERY == 0
            workload_submit(
                project=project,
                cluster=cluster,
                name=f"{TRACE} #{job.line} ({job.gpus} GPU{'s' if job.gpus > 1 else ''})",
                gpus=gpus,
                nodes=nodes,
                min_runtime_seconds=0 if free else round(rule.min_runtime(job) / factor),
                resumable=rule.resumable(job),
                launch_spec={
                    "trace": TRACE,
                    "trace_index": index,
                    "trace_line": job.line,
                    "replay_origin": origin,
                },
                declared_duration_seconds=max(1, round(job.duration)),
                now=now,
            )
            submitted += 1
        index += 1
    return submitted


def _shape(job: TraceJob, cluster: Cluster) -> tuple[int, int] | None:
    """``(gpus, nodes)`` for the job on ``cluster``: whole nodes past one node's worth."""
    if job.gpus < 1 or job.gpus > cluster.total_gpus:
        return None
    if job.gpus <= cluster.gpus_per_node:
        return job.gpus, 1
    nodes = math.ceil(job.gpus / cluster.gpus_per_node)
    if nodes > cluster.nodes:
        return None
    return nodes * cluster.gpus_per_node, nodes
