"""Why the engine walks its queues in a Philly replay, and how often a walk decides nothing.

Run: ``.venv/bin/python -m tests.bench.walk_causes fairshare:256:30000`` — each argument is
``policy:gpus[:first N jobs]``. Printed per argument: the walks (``Walk.run``), each counted
once by the first cause that applies, and how many of them started or preempted something,
with the seconds their cycles took (plain Python, so read them as shares, not as the native
build's times):
- ``submit`` / ``finish`` / ``idle`` / ``cancel`` / ``budget``: a driver call since the last
  cycle made the scheduler dirty, or would have by itself (a finish after a walk that
  started work counts as a finish, not as ``after starts``);
- ``after starts`` / ``after preemptions``: the last walk decided something (starts only, or
  preemptions too), which leaves the scheduler dirty;
- ``dirty, other``: dirty for another reason (a hold the last walk moved or let go, a drain,
  a node state);
- ``timer``: a timer was due (a patience, a wait bound, a memo running out whose recheck
  found a victim set, or one that is not a memo's);
- ``order``: the project order changed;
- ``released``: runs passed their minimum runtime that a pending workload may use
  (``state_quiet.releases_matter``).

It counts on the plain-Python engine (``ENGINE_NATIVE=0``, set here before the engine is
imported), wrapping the scheduler's methods; the decisions are the native build's.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

os.environ["ENGINE_NATIVE"] = "0"  # the counters wrap the engine's methods

from scheduler.engine import state, walk
from scheduler.simulator import ReplayConfig, load_budgets, load_trace, replay
from scheduler.simulator.budgets import Budget
from scheduler.simulator.traces import Trace
from tests.bench.trace_source import first_jobs, from_args, run_spec

_DRIVER_CALLS = {
    "submit": "submit",
    "finish": "finish",
    "set_idle": "idle",
    "cancel": "cancel",
    "set_budget": "budget",
}


class _Counts:
    """What the wrappers saw since the last cycle, and the walks counted so far."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.walked = False
        self.last_walk = ""  # "" / "starts" / "preemptions": what the last walk decided
        self.walks: Counter[tuple[str, bool]] = Counter()
        self.seconds: Counter[tuple[str, bool]] = Counter()  # in the cycles that walked


def _install(counts: _Counts) -> None:
    """Wrap the driver calls, ``Walk.run`` and ``Scheduler.cycle`` to fill ``counts``."""
    scheduler = state.Scheduler
    for method, cause in _DRIVER_CALLS.items():
        original = getattr(scheduler, method)

        def call(self, *args, _original=original, _cause=cause, **kwargs):
            was_dirty = self._dirty
            known = _cause == "submit" and args[0].project in self._work_per_project
            result = _original(self, *args, **kwargs)
            if was_dirty:
                # Already dirty (say, from the last walk's starts): count the call when it
                # would have made the scheduler dirty by itself.
                if _cause != "submit" or not known or _submitted_head(self, args[0].id):
                    counts.calls.append(_cause)
            elif self._dirty:
                counts.calls.append(_cause)
            return result

        setattr(scheduler, method, call)

    original_run = walk.Walk.run

    def run(self, *args, **kwargs):
        counts.walked = True
        return original_run(self, *args, **kwargs)

    walk.Walk.run = run
    original_cycle = scheduler.cycle

    def cycle(self, now, usage, explain=False):
        counts.walked = False
        dirty = self._dirty
        timer = now >= self.next_timer()
        order = self._last_order
        began = time.perf_counter()
        result = original_cycle(self, now, usage, explain)
        seconds = time.perf_counter() - began
        decided = bool(result.starts or result.preemptions)
        if counts.walked:
            if counts.calls:
                cause = counts.calls[0]
            elif dirty and counts.last_walk:
                cause = f"after {counts.last_walk}"
            elif dirty:
                cause = "dirty, other"
            elif timer:
                cause = "timer"
            elif self._last_order != order:
                cause = "order"
            else:
                cause = "released"
            counts.walks[(cause, decided)] += 1
            counts.seconds[(cause, decided)] += seconds
            if not decided:
                counts.last_walk = ""
            else:
                counts.last_walk = "preemptions" if result.preemptions else "starts"
        counts.calls.clear()
        return result

    scheduler.cycle = cycle


def _submitted_head(sched: state.Scheduler, workload_id: str) -> bool:
    """Is the just-submitted workload the head of its shape (``Scheduler.submit`` leaves
    the scheduler clean when it is not)?"""
    job = sched._pending[workload_id]
    return sched._head(sched._queues[job.lane][job.group][job.shape]) is job


_COUNTS: _Counts | None = None  # the one set of counters the wrappers fill (installed once)


def count_walks(
    trace: Trace, budgets: Budget, config: ReplayConfig
) -> tuple[int, Counter, Counter, float]:
    """Replay ``trace``; the cycles it ran, its walks by (first cause, decided something),
    the seconds of those walks' cycles by the same keys, and the replay's wall seconds."""
    global _COUNTS
    if _COUNTS is None:
        _COUNTS = _Counts()
        _install(_COUNTS)
    counts = _COUNTS
    counts.walks = Counter()
    counts.seconds = Counter()
    counts.calls.clear()
    counts.last_walk = ""
    result = replay(trace, budgets, config)
    return result.cycles, counts.walks, counts.seconds, result.wall_seconds


def main(args: list[str]) -> None:
    source, args = from_args(args)
    trace = load_trace(source.path, source.format)
    for arg in args:
        spec = run_spec(arg)
        run_trace = first_jobs(trace, spec)
        budgets = load_budgets(source.budgets, run_trace.jobs)
        config = spec.config()
        cycles, walks, seconds, wall = count_walks(run_trace, budgets, config)
        total = sum(walks.values())
        idle = sum(n for (_, decided), n in walks.items() if not decided)
        idle_seconds = sum(t for (_, decided), t in seconds.items() if not decided)
        print(
            f"{arg}: {cycles:,} cycles, {total:,} walks, {idle:,} of them decided nothing; "
            f"replay {wall:.1f} s, of it {sum(seconds.values()):.1f} s in cycles that walked, "
            f"{idle_seconds:.1f} s in those that decided nothing"
        )
        causes = sorted({cause for cause, _ in walks}, key=lambda c: -walks[(c, False)])
        for cause in causes:
            print(
                f"  {cause:<18} {walks[(cause, False)]:>8,} decided nothing "
                f"({seconds[(cause, False)]:5.1f} s), "
                f"{walks[(cause, True)]:>8,} decided something ({seconds[(cause, True)]:5.1f} s)"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
