"""The shortest debug-class waits the guarantee and the minimum-runtime contract allow, churn
aside: a variant of ``fairshare`` measured and not kept (``docs/simulation.md``, "Why the
miss").

Run: ``.venv/bin/python -m tests.bench.debug_utmost product:512 utmost:512`` — each argument
is ``variant:gpus[:first N jobs]`` on the Philly trace (``--trace PATH`` first: a canonical
trace, budgets proportional). Variants:
- ``product``: ``fairshare`` as it is;
- ``utmost``: a debug-class workload evicts at once (no patience) whatever the two rules let
  go: any other team's work past its minimum runtime above that team's entitlement
  (``debug_reclaim``'s ``any``), and its own project's longer work past its minimum runtime
  with no debug allowance. Victims never take their team below its entitlement, and no work
  is evicted before its minimum runtime ends: what is left of the wait is what those two
  rules cost, whatever the number of preemptions.
The replay wakes at the engine's timers, so a minimum runtime ends on time. Printed per
argument: the figures of ``variant_report.figures_line``.

Installed on the plain-Python engine (``ENGINE_NATIVE=0``, set here before the engine is
imported) and run on the reference path (``incremental=False``). Several minutes per replay.
"""

from __future__ import annotations

import os
import sys

os.environ["ENGINE_NATIVE"] = "0"  # the variant replaces methods of the view's class

from scheduler.engine import policy_fairshare
from tests.bench import debug_patience, debug_reclaim
from tests.bench.variant_report import print_variant_runs

_View = policy_fairshare._FairShareView
_PRODUCT_OWN_VICTIM_OK = _View.own_victim_ok
VARIANTS = ("product", "utmost")


def _install(variant: str) -> None:
    """Put ``variant``'s rules in place (``product``: the product's)."""
    _View.own_victim_ok = _PRODUCT_OWN_VICTIM_OK
    if variant == "product":
        debug_reclaim._install("none")
        debug_patience._install(None)
        return
    debug_reclaim._install("any")
    debug_patience._install(0.0)

    def own_victim_ok(view, job, victim) -> bool:
        # A strictly better class evicts its own project's work, with no debug allowance.
        if job.w.priority != victim.w.priority:
            return job.w.priority > victim.w.priority
        return job.mr < victim.mr

    _View.own_victim_ok = own_victim_ok


def main(args: list[str]) -> None:
    print_variant_runs(args, VARIANTS, _install, True)


if __name__ == "__main__":
    main(sys.argv[1:])
