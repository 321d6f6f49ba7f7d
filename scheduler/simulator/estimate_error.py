"""How far the queue page's estimated start is from the real start, measured on a trace.

The trace is replayed as usual. For a sample of its jobs, right after the cycle that first
saw one (if it still waits, as the page would then show an estimate), the engine is rebuilt
from its state as the page rebuilds it from the database (``Scheduler.rebuilt``) and run
forward with ``forward_starts`` — the page's own algorithm: declared work (here the
trace's durations, so only the page's other assumptions are measured: nothing new arrives,
the usage window stands still), preemptions, reservations. The estimate is compared with
when the replay really started the job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.engine import Scheduler, make_policy
from scheduler.simulator.forward import forward_starts
from scheduler.simulator.replay import ReplayConfig, replay

HORIZON_SECONDS = 7 * 86400.0
MAX_STEPS = 3000


@dataclass(frozen=True)
class EstimateSample:
    """One sampled job: when it was submitted, estimated to start and really started."""

    job: str
    submit: float
    estimate: float | None  # None: not within the horizon
    actual: float | None  # None: never started in the replay
    debug: bool
    gang: bool

    @property
    def error(self) -> float | None:
        """The absolute difference of estimate and actual start in seconds, when both exist."""
        if self.estimate is None or self.actual is None:
            return None
        return abs(self.estimate - self.actual)


class _Probe:
    """The engine, plus an estimate for each sampled job after the cycle that saw it.

    A wrapper (the replay calls ``submit``, ``finish``, ``cycle`` and reads the rest from the
    engine): the native build's classes cannot be subclassed from plain Python.
    """

    def __init__(self, sched: Scheduler, *, durations, resumable, sampled) -> None:
        self.sched = sched
        self.durations = durations
        self.resumable = resumable
        self.sampled = sampled
        self.fresh: list[str] = []
        self.started: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.estimates: dict[str, float | None] = {}

    def __getattr__(self, name):
        return getattr(self.sched, name)

    def submit(self, workload) -> None:
        self.sched.submit(workload)
        if workload.id in self.sampled:
            self.fresh.append(workload.id)

    def finish(self, workload_id: str) -> None:
        self.sched.finish(workload_id)
        self.started.pop(workload_id, None)

    def cycle(self, now, usage, explain=False):
        result = self.sched.cycle(now, usage, explain)
        for preemption in result.preemptions:
            start = self.started.pop(preemption.workload_id, None)
            if start is not None and self.resumable.get(preemption.workload_id):
                self.done[preemption.workload_id] = (
                    self.done.get(preemption.workload_id, 0.0) + now - start
                )
        for start in result.starts:
            self.started[start.workload_id] = now
        pending = set(self.sched.pending_ids()) if self.fresh else set()
        for workload_id in self.fresh:
            if workload_id in pending:
                self.estimates[workload_id] = self._estimate(now, usage, workload_id)
        self.fresh = []
        return result

    def _estimate(self, now: float, usage, target: str) -> float | None:
        # The page's engine is rebuilt from the database: the same state, no memos.
        clone = self.sched.rebuilt()
        remaining = {}
        for workload_id in [*clone.pending_ids(), *clone.running]:
            left = self.durations[workload_id] - self.done.get(workload_id, 0.0)
            if workload_id in clone.running:
                left -= now - self.started.get(workload_id, now)
            remaining[workload_id] = max(0.0, left)
        found = forward_starts(
            clone,
            usage,
            remaining,
            now=now,
            targets={target},
            horizon_seconds=HORIZON_SECONDS,
            max_steps=MAX_STEPS,
        )
        return found.starts.get(target)


def estimate_errors(trace, budgets, config: ReplayConfig, *, samples: int = 300):
    """Replay ``trace`` and estimate the start of about ``samples`` evenly spread jobs as the
    queue page would have at their submission; returns the ``EstimateSample``\\ s of those
    that waited past their first cycle, and the replay's result."""
    every = max(1, math.ceil(len(trace.jobs) / samples))
    sampled = {job.id for job in trace.jobs[::every]}
    durations = {job.id: job.duration for job in trace.jobs}
    resumable = {job.id: config.contract.resumable(job) for job in trace.jobs}
    probes: list[_Probe] = []

    def factory(nodes, budget_root, policy, params):
        probe = _Probe(
            Scheduler(nodes, budget_root, policy=make_policy(policy), params=params),
            durations=durations,
            resumable=resumable,
            sampled=sampled,
        )
        probes.append(probe)
        return probe

    result = replay(trace, budgets, config, scheduler_factory=factory)
    (probe,) = probes
    by_id = {rec.id: rec for rec in result.jobs}
    out = []
    for job_id, estimate in sorted(probe.estimates.items()):
        rec = by_id[job_id]
        out.append(
            EstimateSample(
                job=job_id,
                submit=rec.submit,
                estimate=estimate,
                actual=rec.first_start,
                debug=rec.debug,
                gang=rec.nodes > 1,
            )
        )
    return out, result
