"""Who is offered GPUs above entitlement first: the 7-day window's order (``fairshare``) or
``quota``'s (the part of its entitlement each team holds now): a variant of ``fairshare``
measured and not kept (``docs/simulation.md``, "Why the waits after a preemption are
longer").

Run: ``.venv/bin/python -m tests.bench.above_order window:512 held:512`` — each argument is
``variant:gpus[:first N jobs]`` on the Philly trace (``--trace PATH`` first: a canonical
trace, budgets proportional). Variants:
- ``window``: ``fairshare`` as it is: after the guarantee pass, teams take their turns in the
  window's order (least used over the last 7 days first);
- ``held``: the turns go first to the team holding the smallest part of its entitlement at
  the cycle's start (teams with no entitlement last), the window's order breaking ties, as
  ``quota`` orders what is left after deserved GPUs. Everything else is the product's: the
  guarantee pass, reclaims, holds, loans and moves.
Printed per argument: the figures of ``variant_report.figures_line``, then the waits after
a preemption (p50 / p90, submit window).

Installed on the plain-Python engine (``ENGINE_NATIVE=0``, set here before the engine is
imported) and run on the reference path (``incremental=False``). Minutes per replay.
"""

from __future__ import annotations

import math
import os
import sys

os.environ["ENGINE_NATIVE"] = "0"  # the variant wraps a method of the policy's class

from scheduler.engine import policy_fairshare
from tests.bench.variant_report import print_variant_runs

_PRODUCT_BEGIN = policy_fairshare.FairShare.begin
VARIANTS = ("window", "held")


def _held_order(view) -> list[str]:
    """``view``'s groups, the team holding the smallest part of its entitlement first."""
    alloc, entitled = view.alloc, view.entitled
    position = {group: i for i, group in enumerate(view.groups)}

    def part_held(group: str) -> tuple[float, int]:
        owed = entitled.get(group, 0)
        return (alloc.get(group, 0) / owed if owed > 0 else math.inf, position[group])

    return sorted(view.groups, key=part_held)


def _install(variant: str) -> None:
    """Put ``variant``'s order in place (``window``: the product's)."""
    policy_fairshare.FairShare.begin = _PRODUCT_BEGIN
    if variant == "window":
        return

    def begin(policy, inputs):
        view = _PRODUCT_BEGIN(policy, inputs)
        order = view.groups = _held_order(view)
        # What the view derived from the order, recomputed for the new order.
        view._later_victims = policy_fairshare.later_victims(order, inputs.evictable)
        return view

    policy_fairshare.FairShare.begin = begin


def _requeue_waits(metrics: dict) -> str:
    """The submit window's waits after a preemption, p50 and p90."""
    requeue = metrics["submit_window"]["queue_wait_seconds"]["requeue"]
    return (
        f"after a preemption p50 {requeue['p50'] / 3600:.1f} h, p90 {requeue['p90'] / 3600:.1f} h"
    )


def main(args: list[str]) -> None:
    print_variant_runs(args, VARIANTS, _install, True, _requeue_waits)


if __name__ == "__main__":
    main(sys.argv[1:])
