"""Estimated starts: a scheduler run forward in virtual time from its current state.

One algorithm for the queue page's estimate (``scheduler.selectors.estimates``, on a copy of
the live engine) and for measuring how good that estimate is on a real trace
(``scheduler.simulator.estimate_error``). Assumptions, the page's caveat:

- running work ends when its declared work is done (``remaining``; work without a declared
  duration runs past the horizon, never freeing its GPUs inside the estimate);
- work started in the estimate runs its declared work; work preempted in the estimate keeps
  what it did up to its last checkpoint and pays the restart overhead (the engine's
  ``checkpoint_interval`` and ``restart_overhead``, as the replay does), or starts over when
  it cannot resume;
- nothing new arrives, and the fair-share order stays as it is (the usage window is not
  advanced);
- the policy decides exactly as in production (preemption, minimum runtimes, reservations).

Pure Python: no Django, no database. The scheduler passed in is changed: give it a copy.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.simulator.replay_records import checkpointed_seconds

# Decisions that depend only on time passing (a patience or a gang's wait reaching its
# bound) are taken when the engine's timers say (``Scheduler.next_wait_timer``), as the live
# loop's cycles every few seconds take them; and at least this often in virtual time
# whatever the timers say.
TICK_SECONDS = 900.0
# Nothing ends by itself and nothing changed for this long in virtual time: the run stops
# (past the 30-minute gang reservation bound).
IDLE_SECONDS = 3600.0


@dataclass
class ForwardResult:
    """``starts``: workload id → virtual start time, for the targets that started within the
    horizon. ``steps``: engine cycles run; ``truncated``: stopped on the step bound."""

    starts: dict[str, float] = field(default_factory=dict)
    steps: int = 0
    truncated: bool = False


def forward_starts(
    sched,
    usage: Mapping[str, float],
    remaining: Mapping[str, float],
    *,
    now: float,
    targets: set[str],
    horizon_seconds: float,
    max_steps: int,
) -> ForwardResult:
    """Run ``sched`` forward from ``now`` until every target started, or the bounds.

    ``remaining``: seconds of work left per workload id (pending ones: their whole declared
    work; running ones: counted from ``now``), absent when unknown.
    """
    out = ForwardResult()
    if not targets:
        return out
    horizon = now + horizon_seconds
    work = _Work(sched, remaining, now)
    t = now
    idle_since: float | None = None
    while out.steps < max_steps:
        # Apply every finish due now, then one cycle (as the replay does).
        work.finish_due(t)
        result = sched.cycle(t, usage)
        out.steps += 1
        for preemption in result.preemptions:
            work.preempted(preemption.workload_id, t)
        for start in result.starts:
            if start.workload_id in targets and start.workload_id not in out.starts:
                out.starts[start.workload_id] = t
            work.started(start.workload_id, t)
        if targets <= out.starts.keys() or sched.pending_count() == 0:
            return out
        deadlines = [
            r.start_time + r.workload.min_runtime
            for r in sched.running.values()
            if r.start_time + r.workload.min_runtime > t
        ]
        candidates = [t + TICK_SECONDS, *deadlines, sched.next_wait_timer(t)]
        if work.events:
            candidates.append(work.events[0][0])
        if work.events or deadlines or result.starts or result.preemptions:
            idle_since = None
        else:
            # Nothing will end by itself and nothing changed: only a timer could still
            # start something, and one that does so does it within the hour.
            if idle_since is None:
                idle_since = t
            if t - idle_since >= IDLE_SECONDS:
                return out
        t = min(candidates)
        if t > horizon:
            return out
    out.truncated = True
    return out


class _Work:
    """The work left of each workload as the forward run goes, and when runs end.

    ``events``: finish events (time, seq, workload id, generation), a heap; a preempted run's
    finish is stale (its generation moved on). A run is judged against its start and the
    work it had left then: a preempted resumable workload keeps what it did up to its last
    checkpoint and pays the restart overhead (the engine's ``PolicyParams``, as the replay
    does); other work starts over.
    """

    def __init__(self, sched, remaining: Mapping[str, float], now: float) -> None:
        self.sched = sched
        self.events: list[tuple[float, int, str, int]] = []
        self.generation: dict[str, int] = {}
        self.left = dict(remaining)
        # workload id -> (run start, work left then, it resumes)
        self.runs: dict[str, tuple[float, float, bool]] = {}
        self.seq = 0
        for workload_id, run in sorted(sched.running.items()):
            left = remaining.get(workload_id)
            if left is not None:
                ran = max(0.0, now - run.start_time)
                self._push(workload_id, run.start_time, left + ran, now + left)

    def _push(self, workload_id: str, started: float, left: float, ends: float) -> None:
        resumable = self.sched.running[workload_id].workload.resumable
        self.runs[workload_id] = (started, left, resumable)
        self.seq += 1
        gen = self.generation.get(workload_id, 0)
        heapq.heappush(self.events, (ends, self.seq, workload_id, gen))

    def finish_due(self, t: float) -> None:
        """Tell the scheduler of every run whose work is done by ``t``."""
        events, sched = self.events, self.sched
        while events and events[0][0] <= t:
            _, _, workload_id, gen = heapq.heappop(events)
            if gen == self.generation.get(workload_id, 0) and workload_id in sched.running:
                sched.finish(workload_id)

    def started(self, workload_id: str, t: float) -> None:
        """A run of ``workload_id`` started at ``t``: it ends when its work left is done."""
        left = self.left.get(workload_id)
        if left is not None:
            self._push(workload_id, t, left, t + left)

    def preempted(self, workload_id: str, t: float) -> None:
        """The run of ``workload_id`` was preempted at ``t`` (the engine requeued it)."""
        self.generation[workload_id] = self.generation.get(workload_id, 0) + 1
        run = self.runs.pop(workload_id, None)
        if run is None:
            return
        started, left, resumable = run
        params = self.sched.params
        interval = params.checkpoint_interval
        if resumable and interval > 0:
            saved = checkpointed_seconds(max(0.0, t - started), left, interval)
            left = left - saved + params.restart_overhead
        self.left[workload_id] = left
