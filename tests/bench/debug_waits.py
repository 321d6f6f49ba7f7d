"""How long the Philly replay's debug-class jobs wait for their first start, and why.

Run: ``.venv/bin/python -m tests.bench.debug_waits fairshare:512 quota:512`` — each argument
is ``policy:gpus[:first N jobs]``; ``--trace var/sim/philly-variant.csv`` before them replays
a canonical trace instead, with budgets proportional to each team's GPU-hours. Printed once
for the trace: how many jobs the replay's contract calls debug-class and their share of
GPU-hours; then per argument: the share of
debug-class jobs submitted in the submit window that waited more than 10 minutes, and the
p50 / p90 wait of those in a burst (at least ``BURST`` debug-class jobs of the same project
submitted within ``BURST_SECONDS`` around them, itself included) and of the rest.
"""

from __future__ import annotations

import bisect
import sys
from collections import defaultdict

from scheduler.simulator import ReplayConfig, load_budgets, load_trace, replay
from tests.bench.trace_source import from_args

BURST = 20
BURST_SECONDS = 600.0
LONG_WAIT = 600.0


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _in_burst(jobs) -> set[str]:
    """Ids of debug-class jobs with at least BURST of their project's within BURST_SECONDS."""
    by_project: dict[str, list[float]] = defaultdict(list)
    for job in jobs:
        by_project[job.project].append(job.submit)
    for times in by_project.values():
        times.sort()
    burst = set()
    for job in jobs:
        times = by_project[job.project]
        lo = bisect.bisect_left(times, job.submit - BURST_SECONDS / 2)
        hi = bisect.bisect_right(times, job.submit + BURST_SECONDS / 2)
        if hi - lo >= BURST:
            burst.add(job.id)
    return burst


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def main(args: list[str]) -> None:
    source, args = from_args(args)
    trace = load_trace(source.path, source.format)
    printed_trace = False
    for arg in args:
        policy, gpus, *rest = arg.split(":")
        run_trace = trace.head(int(rest[0])) if rest else trace
        budgets = load_budgets(source.budgets, run_trace.jobs)
        result = replay(
            run_trace, budgets, ReplayConfig(gpus=int(gpus), policy=policy, record_runs=False)
        )
        debug = [j for j in result.jobs if j.debug]
        if not printed_trace:
            every = sum(j.gpus * j.duration for j in result.jobs)
            small = sum(j.gpus * j.duration for j in debug)
            print(
                f"debug-class jobs: {len(debug):,} of {len(result.jobs):,}; "
                f"{small / 3600:,.0f} of {every / 3600:,.0f} GPU-hours ({small / every:.1%})"
            )
            printed_trace = True
        window = [j for j in debug if j.submit <= result.last_submit and j.wait is not None]
        burst = _in_burst(window)
        waits_burst = [j.wait for j in window if j.id in burst]
        waits_alone = [j.wait for j in window if j.id not in burst]
        long = sum(1 for j in window if j.wait > LONG_WAIT)
        print(
            f"{arg}: {long / len(window):.0%} of {len(window):,} wait > 10 min; "
            f"in a burst ({len(waits_burst):,}): p50 {_minutes(_quantile(waits_burst, 0.5))}, "
            f"p90 {_minutes(_quantile(waits_burst, 0.9))}; "
            f"alone ({len(waits_alone):,}): p50 {_minutes(_quantile(waits_alone, 0.5))}, "
            f"p90 {_minutes(_quantile(waits_alone, 0.9))}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
