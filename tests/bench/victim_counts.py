"""How often the same runs are preempted: distinct victims and repeats (``docs/simulation.md``).

Run: ``.venv/bin/python -m tests.bench.victim_counts quota:32 fairshare:32`` — each argument is
``policy:gpus[:first N jobs]`` on the Philly trace (``--trace PATH`` first: a canonical
trace, budgets proportional). Printed per argument, over the whole replay: the preemptions,
the workloads preempted at least once, those preempted five times or more, the most times
one workload was preempted, and the preemptions of workloads that run longer than a week
(the weeks-long services of a trace such as Alibaba's).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace

from scheduler.simulator import replay
from tests.bench.trace_source import each_run

REPEATED = 5
WEEK = 7 * 86400.0


def victim_counts(result) -> dict[str, int]:
    """Preemptions, distinct victims, victims taken ``REPEATED`` times or more, the most
    times one victim was taken, and the preemptions of workloads that run longer than a week,
    from a replay's preemption and job records."""
    per_job = Counter(event.job for event in result.preemptions)
    return {
        "preemptions": len(result.preemptions),
        "victims": len(per_job),
        f"victims_{REPEATED}_or_more": sum(1 for n in per_job.values() if n >= REPEATED),
        "most_for_one": max(per_job.values(), default=0),
        "of_week_long": sum(n for job, n in per_job.items() if result.jobs[job].duration > WEEK),
    }


def main(argv: list[str]) -> None:
    """Print one line per ``policy:gpus[:jobs]`` argument."""
    for arg, trace, budgets, config in each_run(argv):
        counts = victim_counts(replay(trace, budgets, replace(config, record_runs=True)))
        print(arg, "  ".join(f"{k}={v:,}" for k, v in counts.items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
