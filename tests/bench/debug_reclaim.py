"""Debug-class work reclaiming GPUs from teams above their entitlement: variants of
``fairshare`` measured and not kept (``docs/simulation.md``, "Why the miss").

Run: ``.venv/bin/python -m tests.bench.debug_reclaim none:512 any:512 ranked:512
allowance:512`` — each argument is ``variant:gpus[:first N jobs]`` on the Philly trace
(``--trace PATH`` first: a canonical trace, budgets proportional). Variants, each on top of
``fairshare``'s own reclaim (a team below its entitlement):
- ``none``: ``fairshare`` as it is;
- ``allowance``: a debug-class workload may also reclaim while its project's debug-class GPUs
  stay within the debug allowance (``PolicyParams.debug_share`` of its entitlement);
- ``any``: a debug-class workload may always reclaim;
- ``ranked``: as ``any``, but only from teams after its own in the 7-day window's order.
Victims are as for any reclaim: past their minimum runtime, and never taking a team below its
entitlement. Printed per argument: the figures of ``variant_report.figures_line``.

The variants are installed on the plain-Python engine (``ENGINE_NATIVE=0``, set here before
the engine is imported) and run on the reference path (``incremental=False``): the
incremental engine's memos follow the product's rules, not these. A few minutes per replay.
"""

from __future__ import annotations

import os
import sys

os.environ["ENGINE_NATIVE"] = "0"  # the variants replace methods of the view's class

from scheduler.engine import policy_fairshare
from tests.bench.variant_report import print_variant_runs

_View = policy_fairshare._FairShareView
_PRODUCT = {
    name: getattr(_View, name)
    for name in ("may_reclaim", "group_may_reclaim", "may_lose_to_reclaim", "may_preempt_project")
}
VARIANTS = ("none", "allowance", "any", "ranked")


def _install(variant: str) -> None:
    """Put ``variant``'s rules on the view's class (``none``: the product's)."""
    for name, method in _PRODUCT.items():
        setattr(_View, name, method)
    if variant == "none":
        return
    product_may_reclaim = _PRODUCT["may_reclaim"]
    product_may_preempt = _PRODUCT["may_preempt_project"]

    def debug_reclaims(view, job) -> bool:
        params = view.inputs.params
        if not job.charged or job.mr > params.debug_min_runtime:
            return False
        if not view.borrowers_set - {job.project}:
            return False
        if variant != "allowance":
            return True
        allowance = max(job.gpus, params.debug_share * view.entitled.get(job.project, 0))
        return view.debug_alloc.get(job.project, 0) + job.gpus <= allowance

    def may_reclaim(view, job) -> bool:
        return product_may_reclaim(view, job) or debug_reclaims(view, job)

    def may_preempt_project(view, job, project, gpus) -> bool:
        if not product_may_preempt(view, job, project, gpus):
            return False
        if variant != "ranked" or product_may_reclaim(view, job):
            return True
        rank = {group: i for i, group in enumerate(view.groups)}
        return rank.get(project, len(rank)) > rank.get(job.project, len(rank))

    _View.may_reclaim = may_reclaim
    _View.may_preempt_project = may_preempt_project
    # The cheap tests a walk asks first must let the new reclaims through.
    _View.group_may_reclaim = lambda view, group: bool(view.borrowers_set)
    _View.may_lose_to_reclaim = lambda view, project, gpus, claimants: gpus <= view._room(project)


def main(args: list[str]) -> None:
    print_variant_runs(args, VARIANTS, _install)


if __name__ == "__main__":
    main(sys.argv[1:])
