"""How long a debug-class workload waits for GPUs to free before it evicts: variants of
``fairshare``'s break-even patience, measured and not kept (``docs/simulation.md``, "Why the
miss").

Run: ``.venv/bin/python -m tests.bench.debug_patience own:512 5min:512 1min:512`` — each
argument is ``variant:gpus[:first N jobs]`` on the Philly trace (``--trace PATH`` first: a
canonical trace, budgets proportional). A workload evicts only once it has waited as long as
the eviction would lose per GPU of its own; a debug-class one waits at most:
- ``own``: its own minimum runtime (``fairshare`` as it is: up to 30 minutes);
- ``5min`` / ``1min``: five minutes / one minute.
Everything else (whom it may evict, the victims) is the product's, and the replay wakes at the
engine's timers (``ReplayConfig.wake_at_timers``), so each patience ends on time as in the live
loop, whose cycles run every few seconds. Printed per argument: the
figures of ``variant_report.figures_line``.

The variants are installed on the plain-Python engine (``ENGINE_NATIVE=0``, set here before
the engine is imported) and run on the reference path (``incremental=False``): the
incremental engine's memos follow the product's rules, not these. A few minutes per replay.
"""

from __future__ import annotations

import os
import sys

os.environ["ENGINE_NATIVE"] = "0"  # the variants wrap a function the walk calls

from scheduler.engine import walk_victims
from tests.bench.variant_report import print_variant_runs

CAPS = {"own": None, "5min": 300.0, "1min": 60.0}
_PRODUCT = walk_victims.preempt


def _install(cap: float | None) -> None:
    """Make a debug-class workload waiting out its patience evict once it has waited
    ``cap`` seconds (None: the product's rule)."""
    if cap is None:
        walk_victims.preempt = _PRODUCT
        return

    def preempt(walk, job, only, eligible):
        started, later = _PRODUCT(walk, job, only, eligible)
        waiting = not started and later and job.patient_until > walk.now
        if not waiting or job.mr > walk.params.debug_min_runtime:
            return started, later
        ready_at = job.queued_at + cap
        if walk.now < ready_at:
            # The product set its own deadline; this one is sooner.
            job.patient_until = min(job.patient_until, ready_at)
            walk.s._set_timer(job.patient_until)
            return started, later
        choice = walk_victims.search(walk, job, only, eligible, walk.reserved).choice
        job.patient_until = 0.0
        walk_victims.evict_and_start(walk, job, choice)
        return True, False

    walk_victims.preempt = preempt


def main(args: list[str]) -> None:
    print_variant_runs(args, tuple(CAPS), lambda variant: _install(CAPS[variant]), True)


if __name__ == "__main__":
    main(sys.argv[1:])
