"""Where a Philly replay's engine time goes: cycles that decided something against cycles that
decided nothing.

Run: ``.venv/bin/python -m tests.bench.cycle_split fairshare:256`` — each argument is
``policy:gpus[:first N jobs]``. Printed per argument: the replay's wall seconds, then for each
kind of cycle (one that started or preempted something, one that did not) how many there
were and the seconds spent inside ``Scheduler.cycle``. The rest of the wall time is the
replay's own bookkeeping.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from scheduler.simulator import load_budgets, load_trace, replay
from scheduler.simulator.replay import _engine_scheduler
from scheduler.traces import PHILLY_BUDGETS, PHILLY_JOBS
from tests.bench.trace_source import first_jobs, run_spec


class _Timed:
    """A scheduler whose cycles are counted and timed by what they decided."""

    def __init__(self, sched) -> None:
        self._sched = sched
        self.count: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    def __getattr__(self, name):
        return getattr(self._sched, name)

    def cycle(self, now, usage, explain=False):
        began = time.perf_counter()
        result = self._sched.cycle(now, usage, explain)
        kind = "decided" if result.starts or result.preemptions else "nothing"
        self.count[kind] += 1
        self.seconds[kind] += time.perf_counter() - began
        return result


def _factory(out: list[_Timed], nodes, root, policy_name, params) -> _Timed:
    out.append(_Timed(_engine_scheduler(nodes, root, policy_name, params)))
    return out[-1]


def main(args: list[str]) -> None:
    trace = load_trace(PHILLY_JOBS, "philly")
    for arg in args:
        spec = run_spec(arg)
        run_trace = first_jobs(trace, spec)
        budgets = load_budgets(PHILLY_BUDGETS, run_trace.jobs)
        timed: list[_Timed] = []
        config = spec.config()
        result = replay(
            run_trace, budgets, config, scheduler_factory=lambda *a, out=timed: _factory(out, *a)
        )
        (probe,) = timed
        parts = ", ".join(
            f"{kind} {probe.count[kind]:,} cycles in {probe.seconds[kind]:.1f} s"
            for kind in ("decided", "nothing")
        )
        print(f"{arg}: wall {result.wall_seconds:.1f} s; {parts}")


if __name__ == "__main__":
    main(sys.argv[1:])
