"""Where a policy's idle GPUs go while the cluster is over-demanded, on the Philly replay.

Run: ``.venv/bin/python -m tests.bench.idle_breakdown fairshare:512 quota:512`` — each
argument is ``policy:gpus[:first N jobs]``; ``--trace var/sim/philly-variant.csv`` before them
replays a canonical trace instead, with budgets proportional to each team's GPU-hours. The
engine's state is sampled every 15 simulated minutes of the submit window (first to last
submission); a sample counts when the pending
workloads ask for more GPUs than are free (over-demand at that instant, a finer test than
the replay's hourly one). Printed per argument, as shares of the cluster's GPU-time in those
samples: busy, and idle by cause (``scheduler.engine.IdleGpus``): held for a blocked
workload, left over on nodes a gang owns, fragmented (no pending single-node workload fits
on any such node) and unused (one would fit: the policy left it).
"""

from __future__ import annotations

import sys
from collections import Counter

from scheduler.engine import IdleGpus, Scheduler, make_policy
from scheduler.simulator import ReplayConfig, load_budgets, load_trace, replay
from tests.bench.trace_source import PHILLY, TraceSource, from_args, run_spec

SAMPLE_SECONDS = 900.0

CAUSES = ("held", "gang_owned", "fragmented", "unused")


class _Sampled:
    """A scheduler that samples its idle GPUs on a fixed grid of simulated time."""

    def __init__(self, sched: Scheduler, gpus: int, window: tuple[float, float]) -> None:
        self._sched = sched
        self._gpus = gpus
        self._first, self._last = window
        self._next = self._first
        self._idle: IdleGpus | None = None
        self.totals: Counter[str] = Counter()

    def __getattr__(self, name):
        return getattr(self._sched, name)

    def cycle(self, now, usage, explain=False):
        # What the previous cycle left held until the events at ``now`` (finishes, submits)
        # changed it: count it at every grid instant before ``now``.
        idle = self._idle
        while self._next < now and self._next <= self._last:
            if idle is not None:
                free = idle.held + idle.gang_owned + idle.fragmented + idle.unused
                if idle.pending_gpus > free:
                    self.totals["samples"] += 1
                    self.totals["busy"] += self._gpus - free
                    for cause in CAUSES:
                        self.totals[cause] += getattr(idle, cause)
            self._next += SAMPLE_SECONDS
        result = self._sched.cycle(now, usage, explain)
        self._idle = self._sched.idle_gpus()
        return result


def breakdown(
    policy: str, gpus: int, jobs: int | None = None, source: TraceSource = PHILLY
) -> Counter[str]:
    """GPU-samples busy and idle by cause at over-demand, and the number of samples."""
    trace = load_trace(source.path, source.format)
    if jobs:
        trace = trace.head(jobs)
    budgets = load_budgets(source.budgets, trace.jobs)
    submits = [job.submit_time for job in trace.jobs]
    wrappers: list[_Sampled] = []

    def factory(node_list, budget_root, policy_name, params):
        sched = Scheduler(node_list, budget_root, policy=make_policy(policy_name), params=params)
        wrappers.append(_Sampled(sched, gpus, (min(submits), max(submits))))
        return wrappers[-1]

    config = ReplayConfig(gpus=gpus, policy=policy, record_runs=False)
    replay(trace, budgets, config, scheduler_factory=factory)
    return wrappers[0].totals


def main(args: list[str]) -> None:
    """Print one line per ``policy:gpus[:jobs]`` argument (``--trace PATH`` first: another
    canonical trace, with budgets proportional to each team's GPU-hours)."""
    source, args = from_args(args)
    for spec in args:
        run = run_spec(spec)
        totals = breakdown(run.policy, run.gpus, run.first, source)
        capacity = totals["samples"] * run.gpus or 1
        shares = ", ".join(
            f"{name} {100 * totals[name] / capacity:.1f} %" for name in ("busy", *CAUSES)
        )
        hours = totals["samples"] * SAMPLE_SECONDS / 3600
        print(f"{spec}: over-demand {hours:,.0f} h; {shares}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
