"""Estimated starts: a scheduler run forward in virtual time from its current state.

One algorithm for the queue page's estimate (``scheduler.selectors.estimates``, on a copy of
the live engine) and for measuring how good that estimate is on a real trace
(``scheduler.simulator.estimate_error``). Assumptions, the page's caveat:

- running work ends when its declared work is done (``remaining``; work without a declared
  duration runs past the horizon, never freeing its GPUs inside the estimate);
- work started in the estimate runs its declared work;
- nothing new arrives, and the fair-share order stays as it is (the usage window is not
  advanced);
- the policy decides exactly as in production (preemption, minimum runtimes, reservations).

Pure Python: no Django, no database. The scheduler passed in is changed: give it a copy.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

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
    # Finish events (time, seq, workload id, generation): a preempted run's finish is stale.
    events: list[tuple[float, int, str, int]] = []
    generation: dict[str, int] = {}
    seq = 0
    for workload_id in sorted(sched.running):
        left = remaining.get(workload_id)
        if left is not None:
            seq += 1
            heapq.heappush(events, (now + left, seq, workload_id, 0))
    t = now
    idle_since: float | None = None
    while out.steps < max_steps:
        # Apply every finish due now, then one cycle (as the replay does).
        while events and events[0][0] <= t:
            _, _, workload_id, gen = heapq.heappop(events)
            if gen == generation.get(workload_id, 0) and workload_id in sched.running:
                sched.finish(workload_id)
        result = sched.cycle(t, usage)
        out.steps += 1
        for start in result.starts:
            if start.workload_id in targets and start.workload_id not in out.starts:
                out.starts[start.workload_id] = t
            left = remaining.get(start.workload_id)
            if left is not None:
                seq += 1
                heapq.heappush(
                    events, (t + left, seq, start.workload_id, generation.get(start.workload_id, 0))
                )
        for preemption in result.preemptions:
            # The engine requeued it; its pending finish no longer applies. (A requeued
            # resumable workload's lost work is ignored: an estimate, not a replay.)
            generation[preemption.workload_id] = generation.get(preemption.workload_id, 0) + 1
        if targets <= out.starts.keys() or sched.pending_count() == 0:
            return out
        deadlines = [
            r.start_time + r.workload.min_runtime
            for r in sched.running.values()
            if r.start_time + r.workload.min_runtime > t
        ]
        candidates = [t + TICK_SECONDS, *deadlines]
        if events:
            candidates.append(events[0][0])
        candidates.append(sched.next_wait_timer(t))
        if events or deadlines or result.starts or result.preemptions:
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
