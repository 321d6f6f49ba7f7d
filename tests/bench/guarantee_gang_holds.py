"""A gang whose start would take its team past its entitlement, holding nodes in the guarantee
pass or only after it: a variant of ``fairshare`` measured (``docs/simulation.md``, "Other
seeds of the variant").

Run: ``.venv/bin/python -m tests.bench.guarantee_gang_holds none:512 yields:512`` — each
argument is ``variant:gpus[:first N jobs]`` on the Philly trace (``--trace PATH`` first: a
canonical trace, budgets proportional). Variants:
- ``none``: ``fairshare`` as it is: in the guarantee pass a single-node workload that would
  take its team past its entitlement holds nothing against other teams' guaranteed work, a
  gang holds (and clears nodes) as it does in any pass;
- ``yields``: such a gang too holds nothing in the guarantee pass; it holds and clears in the
  ordinary pass that follows, after every team's guaranteed work had its turn.
Printed per argument: the figures of ``variant_report.figures_line``.

The variant is installed on the plain-Python engine (``ENGINE_NATIVE=0``, set here before the
engine is imported) and run on the reference path (``incremental=False``): the incremental
engine's memos follow the product's rules, not this one's. A few minutes per replay.
"""

from __future__ import annotations

import os
import sys

os.environ["ENGINE_NATIVE"] = "0"  # the variant replaces a function the walk calls

from scheduler.engine import walk, walk_reserve
from tests.bench.variant_report import print_variant_runs

_PRODUCT_WALK_GROUP = walk.Walk._walk_group
_PRODUCT_RESERVE = walk_reserve.reserve
VARIANTS = ("none", "yields")


def _walk_group(self, lane, group, shapes, guaranteed_only=False, short_only=False):
    # Which pass the walk is in, for ``_reserve`` below.
    self.guarantee_pass = guaranteed_only
    try:
        return _PRODUCT_WALK_GROUP(self, lane, group, shapes, guaranteed_only, short_only)
    finally:
        self.guarantee_pass = False


def _reserve(walk_, job):
    if (
        getattr(walk_, "guarantee_pass", False)
        and job.nodes > 1
        and not walk_.view.may_reclaim(job)
    ):
        # Not marked as having had its turn to hold: the ordinary pass tries it again.
        walk_._reserved_for.discard(job.id)
        return None
    return _PRODUCT_RESERVE(walk_, job)


def _install(variant: str) -> None:
    """Put ``variant``'s rule in place (``none``: the product's)."""
    walk.Walk._walk_group = _PRODUCT_WALK_GROUP if variant == "none" else _walk_group
    walk_reserve.reserve = _PRODUCT_RESERVE if variant == "none" else _reserve


def main(args: list[str]) -> None:
    print_variant_runs(args, VARIANTS, _install)


if __name__ == "__main__":
    main(sys.argv[1:])
