"""Holds that persist across walks, against holds chosen afresh each walk: a variant of the
engine measured and not kept (``docs/simulation.md``, "What changed in `fairshare`").

Run: ``.venv/bin/python -m tests.bench.hold_persistence fresh:512 kept:512`` — each argument
is ``variant:gpus[:first N jobs]`` on the Philly trace, with ``fairshare`` (``--trace PATH``
first: a canonical trace, budgets proportional). Variants:
- ``fresh``: the product, where a blocked workload's hold is chosen again in every walk
  (emptiest nodes first, then those whose work becomes preemptible soonest);
- ``kept``: a hold persists: a holder keeps every node it held in its last walk while the
  node stays healthy, unheld by work earlier in the walk and large enough for it, and only
  the nodes it lost are chosen afresh (in the product's order);
- ``kept-gangs``: as ``kept`` for gangs only; single-node holds are chosen afresh;
- ``kept-single``: as ``kept`` for single-node holds only; gangs' holds are chosen afresh.

Printed per argument, over the submit window: hourly delivery, the worst team's delivery and
hourly delivery, occupancy at over-demand, first-start waits (p50 / p90) of gangs and of
whole-node single-node work (the holders a hold serves), debug and other p90; over the whole
replay: preemptions.

The variant is installed on the plain-Python engine (``ENGINE_NATIVE=0``, set here before
the engine is imported) and run on the reference path (``incremental=False``). A few
minutes per replay.
"""

from __future__ import annotations

import os
import sys

os.environ["ENGINE_NATIVE"] = "0"  # the variants replace functions of the holds module

from scheduler.engine import holds
from scheduler.engine.model import NodeState
from scheduler.simulator import compute_metrics, replay
from scheduler.simulator.metrics import hold_kind
from tests.bench.debug_waits import nearest_rank
from tests.bench.trace_source import each_variant_run

_PRODUCT = {"hold_gang": holds.hold_gang, "hold_single": holds.hold_single}
VARIANTS = ("fresh", "kept", "kept-gangs", "kept-single")


def _install(variant: str) -> None:
    """Put ``variant``'s hold choice on the holds module (``fresh``: the product's)."""
    for name, function in _PRODUCT.items():
        setattr(holds, name, function)
    if variant == "fresh":
        return
    last: dict[str, list[int]] = {}  # holder -> the nodes it held in its last walk

    def usable(walk, idx: int, gpus: int) -> bool:
        rec = walk.cap.nodes[idx]
        return idx not in walk.reserved and rec.state == NodeState.HEALTHY and rec.gpus >= gpus

    def hold_gang(walk, job):
        kept = [i for i in last.get(job.id, ()) if usable(walk, i, job.per_node)]
        chosen = kept[: job.nodes]
        if len(chosen) < job.nodes:
            for idx in holds._hold_order(walk, walk.s._loans.get(job.id)):
                if idx not in chosen and usable(walk, idx, job.per_node):
                    chosen.append(idx)
                    if len(chosen) == job.nodes:
                        break
            else:
                return None
        last[job.id] = chosen
        return chosen

    def hold_single(walk, job):
        before = last.get(job.id)
        if before and usable(walk, before[0], job.gpus):
            rec = walk.cap.nodes[before[0]]
        else:
            rec = _PRODUCT["hold_single"](walk, job)
        if rec is not None:
            last[job.id] = [rec.idx]
        return rec

    if variant != "kept-single":
        holds.hold_gang = hold_gang
    if variant != "kept-gangs":
        holds.hold_single = hold_single


def _holder_waits(result) -> dict[str, tuple[float, float]]:
    """First-start waits (p50, p90) of the jobs submitted in the submit window that a hold
    serves: gangs, and single-node jobs of a whole node (never-started ones counted to the
    replay's end)."""
    per_node = result.config.gpus_per_node
    waits: dict[str, list[float]] = {"gang": [], "whole_node": []}
    for rec in result.jobs:
        if rec.submit > result.last_submit:
            continue
        kind = hold_kind(rec.nodes, rec.gpus, per_node)
        if kind is None:
            continue
        start = result.end_time if rec.first_start is None else rec.first_start
        waits[kind].append(start - rec.submit)
    return {kind: (nearest_rank(w, 0.5), nearest_rank(w, 0.9)) for kind, w in waits.items()}


def main(args: list[str]) -> None:
    for arg, variant, trace, budgets, config in each_variant_run(args, VARIANTS):
        _install(variant)
        result = replay(trace, budgets, config)
        metrics = compute_metrics(result)
        window = metrics["submit_window"]
        waits = window["queue_wait_seconds"]
        held = _holder_waits(result)
        print(
            f"{arg}: hourly delivery {window['hourly_delivery_ratio']:.1%}, worst team "
            f"{window['worst_team_delivery_ratio']:.1%} / hourly "
            f"{window['worst_team_hourly_delivery_ratio']:.1%}, occupancy at over-demand "
            f"{window['occupancy_when_oversubscribed']:.1%}, gang wait p50/p90 "
            f"{held['gang'][0] / 3600:.1f} / {held['gang'][1] / 3600:.1f} h, whole-node "
            f"{held['whole_node'][0] / 3600:.1f} / {held['whole_node'][1] / 3600:.1f} h, "
            f"debug p90 {waits['debug']['p90'] / 60:.0f} min, other p90 "
            f"{waits['other']['p90'] / 3600:.1f} h; whole replay: "
            f"{metrics['preemptions']:,} preemptions",
            flush=True,
        )
    _install("fresh")


if __name__ == "__main__":
    main(sys.argv[1:])
