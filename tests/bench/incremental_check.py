"""The incremental engine and the full recomputation decide alike over a whole replay.

Run: ``.venv/bin/python -m tests.bench.incremental_check fairshare:256 fairshare:512`` —
each argument is ``policy:gpus[:first N jobs]``; ``--trace var/sim/philly-variant.csv``
first replays a canonical trace instead, with budgets proportional to GPU-hours;
``--wake-at-timers`` (anywhere after ``--trace PATH``) replays waking also when a wait the
engine keeps ends, and compares each path's next such wait too.

The property tests (``tests/engine/test_incremental.py``) replay small random traces and a
slice of Philly through ``Scheduler(incremental=True)`` and ``incremental=False`` and compare
every cycle's starts (with placements) and preemptions. A whole trace reaches states they
rarely do (hundreds of holds, loans, memos of failed searches weeks old); this compares
the same orders over every cycle of a whole replay. Printed per argument: the cycles that
ordered something on each path, and ``same`` or the first cycle whose orders differ, with
the two cycles before and after it on both paths.
"""

from __future__ import annotations

import sys

from tests.bench.trace_source import each_run
from tests.engine.test_incremental import recorded_orders


def main(args: list[str]) -> None:
    timers = "--wake-at-timers" in args
    args = [arg for arg in args if arg != "--wake-at-timers"]
    for arg, trace, budgets, config in each_run(args):
        gpus, policy = config.gpus, config.policy
        reference = recorded_orders(trace, budgets, gpus, policy, False, timers=timers)
        incremental = recorded_orders(trace, budgets, gpus, policy, True, timers=timers)
        print(f"{arg}: {len(reference):,} / {len(incremental):,} cycles ordered something")
        for i, (ref, inc) in enumerate(zip(reference, incremental, strict=False)):
            if ref != inc:
                print(f"  first difference: cycle {i:,}, at {ref[0]:.0f} / {inc[0]:.0f}")
                for j in range(max(0, i - 2), min(i + 3, len(reference), len(incremental))):
                    print(f"  reference   {reference[j]}\n  incremental {incremental[j]}")
                break
        else:
            same = len(reference) == len(incremental)
            print("  same" if same else "  a prefix is the same; one path ordered more cycles")


if __name__ == "__main__":
    main(sys.argv[1:])
