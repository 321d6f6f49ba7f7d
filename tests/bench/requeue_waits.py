"""Waits after a preemption, by what evicted the workload (``docs/simulation.md``).

Run: ``.venv/bin/python -m tests.bench.requeue_waits fairshare:512 quota:512`` — each
argument is ``policy:gpus[:first N jobs]`` on the Philly trace (``--trace PATH`` first: a canonical trace,
budgets proportional). Printed per argument, for the submit window and counted as
``metrics.json``'s ``requeue`` waits are there (a wait still open at the window's end counts
up to it): the waits by cause, with their number, p50, p90 and mean. Causes, from the
eviction's reason:
- ``reclaim``: another team's workload took GPUs the victim's team ran above its entitlement
  (``quota``: above its deserved quota);
- ``own project``: a workload of a better class in the victim's own project (a swap);
- ``move``: the victim was moved to empty a node for a blocked single-node workload;
- ``recall``: the victim borrowed a held node and its holder took it back;
- ``free lane``: the victim ran in the free lane (minimum runtime 0);
- ``drain``: its node was drained.
Then the waits after a reclaim again, by the victim's GPUs.

It reads each eviction's reason as the replay applies it, so it runs the plain-Python engine
and replay loop (``ENGINE_NATIVE=0``, set here before they are imported). About half a minute
per replay at 512 GPUs.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict

os.environ["ENGINE_NATIVE"] = "0"  # the counter wraps the replay loop's method

from scheduler.simulator import (
    ReplayConfig,
    compute_metrics,
    replay,
    replay_loop,
)
from scheduler.simulator.metrics import wait_summary
from tests.bench.trace_source import each_run

CAUSES = ("reclaim", "own project", "move", "recall", "free lane", "drain")


def cause_of(order, victim_project: str, victim_free: bool, preemptor_project: str | None) -> str:
    """Which of ``CAUSES`` evicted a workload, from the engine's ``Preemption`` ``order``."""
    if order.kind == "drain":
        return "drain"
    if victim_free:
        return "free lane"
    if "moved to empty" in order.reason:
        return "move"
    if "borrowed GPUs held for" in order.reason:
        return "recall"
    if preemptor_project == victim_project:
        return "own project"
    return "reclaim"


def requeue_waits_by_cause(
    trace, budgets, config: ReplayConfig, reclaims_by_size: dict | None = None
) -> tuple[dict, int]:
    """Replay; the submit window's requeue waits (seconds) by cause, and how many waits
    ``metrics.json`` counts there (the same waits, all causes together). The waits after a
    reclaim are also added to ``reclaims_by_size``, by the victim's GPUs, when given."""
    causes: dict[tuple[int, float], str] = {}
    original = replay_loop.EventLoop.preempt

    def preempt(loop, t, order):
        victim = loop.jobs[loop.by_id[order.workload_id]]
        by = loop.by_id.get(order.by) if order.by is not None else None
        preemptor_project = loop.jobs[by].project if by is not None else None
        causes[(loop.by_id[order.workload_id], t)] = cause_of(
            order, victim.project, victim.min_runtime <= 0, preemptor_project
        )
        return original(loop, t, order)

    replay_loop.EventLoop.preempt = preempt
    try:
        result = replay(trace, budgets, config)
    finally:
        replay_loop.EventLoop.preempt = original
    window = compute_metrics(result)["submit_window"]
    end = window["end_time"]
    waits: dict[str, list[float]] = defaultdict(list)
    for j, rec in enumerate(result.jobs):
        if rec.submit > end:
            continue
        for requeued, restarted in rec.requeues:
            if requeued > end:
                break
            wait = restarted - requeued if restarted is not None and restarted <= end else None
            cause = causes[(j, requeued)]
            counted_wait = end - requeued if wait is None else wait
            waits[cause].append(counted_wait)
            if cause == "reclaim" and reclaims_by_size is not None:
                reclaims_by_size.setdefault(rec.gpus, []).append(counted_wait)
    return waits, window["queue_wait_seconds"]["requeue"]["count"]


def main(args: list[str]) -> None:
    for arg, trace, budgets, config in each_run(args):
        by_size: dict[int, list[float]] = {}
        waits, counted = requeue_waits_by_cause(trace, budgets, config, by_size)
        total = sum(len(w) for w in waits.values())
        print(
            f"{arg}: {total:,} waits after a preemption in the submit window ({counted:,} in metrics.json)"
        )
        for cause in CAUSES:
            if not waits.get(cause):
                continue
            s = wait_summary(waits[cause])
            print(
                f"  {cause:<12} {s['count']:>6,}  p50 {s['p50'] / 3600:6.2f} h  "
                f"p90 {s['p90'] / 3600:6.2f} h  mean {s['mean'] / 3600:6.2f} h"
            )
        for gpus in sorted(by_size):
            s = wait_summary(by_size[gpus])
            print(
                f"  reclaimed, {gpus:>3} GPUs {s['count']:>6,}  p50 {s['p50'] / 3600:6.2f} h  "
                f"p90 {s['p90'] / 3600:6.2f} h"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
