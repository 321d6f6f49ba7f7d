"""Choosing victims: the cheapest set of running workloads whose eviction lets a job start.

"Cheapest" is fewest GPU-seconds of work lost (see ``records.lost_gpu_seconds``), then fewest
GPUs evicted, then fewest workloads, then the fullest node (consolidation), then node name.
Only what lets the preemptor start is evicted: one node's worth for a single-node job, whole
nodes for a gang.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass

from scheduler.engine.model import NodeState
from scheduler.engine.placement import Capacity, NodeRec
from scheduler.engine.records import Job


@dataclass(slots=True)
class VictimChoice:
    """Where the preemptor goes and whom it evicts (victims sorted by id)."""

    nodes: list[NodeRec]
    victims: list[Job]
    lost: float


def _cover(items: list[tuple[float, int, str, Job]], need: int) -> tuple | None:
    """Cheapest subset of ``items`` (lost, gpus, id, job) freeing at least ``need`` GPUs.

    A small knapsack: states are GPUs freed so far (capped at ``need``), each keeping its
    cheapest (lost, GPUs, count, ids) cost. Items on one node are few, so this is exact and
    cheap.
    """
    if need <= 0:
        return (0.0, 0, 0, ()), ()
    if sum(i[1] for i in items) < need:
        return None
    states: dict[int, tuple[tuple, tuple]] = {0: ((0.0, 0, 0, ()), ())}
    for item in sorted(items, key=lambda i: i[2]):
        lost, gpus, wid, _ = item
        for freed, (cost, subset) in list(states.items()):
            if freed >= need:
                continue
            reach = min(need, freed + gpus)
            new = (cost[0] + lost, cost[1] + gpus, cost[2] + 1, (*cost[3], wid))
            old = states.get(reach)
            if old is None or new < old[0]:
                states[reach] = (new, (*subset, item))
    return states.get(need)


def choose_victims(
    job: Job,
    candidates: Mapping[str, Job],
    lost: Mapping[str, float],
    capacity: Capacity,
    reserved: Container[int],
) -> VictimChoice | None:
    """The cheapest way to start ``job`` by evicting some of ``candidates``, or None.

    ``candidates`` are the running workloads the policy lets ``job`` preempt; ``lost`` gives
    each one's lost GPU-seconds. Reserved and unhealthy nodes are never landed on.
    """
    by_node: dict[str, list[Job]] = {}
    for victim in candidates.values():
        for name in victim.placement:
            by_node.setdefault(name, []).append(victim)
    if job.nodes == 1:
        return _single(job, by_node, lost, capacity, reserved)
    return _gang(job, by_node, lost, capacity, reserved)


def _usable(rec: NodeRec, reserved: Container[int]) -> bool:
    # A gang's node is not "schedulable" but may be landed on once the gang is evicted.
    return rec.state == NodeState.HEALTHY and rec.idx not in reserved


def _single(job, by_node, lost, capacity, reserved) -> VictimChoice | None:
    best = None
    for name, victims in by_node.items():
        rec = capacity.by_name[name]
        if rec.gpus < job.gpus or not _usable(rec, reserved):
            continue
        if rec.exclusive is not None:
            owner = next((v for v in victims if v.id == rec.exclusive), None)
            if owner is None:
                continue
            subset = ((lost[owner.id], owner.gpus, owner.id, owner),)
            freed = rec.running[owner.id]
            cost = (lost[owner.id], owner.gpus, 1, (owner.id,))
            leftover = rec.free + freed - job.gpus
        else:
            need = job.gpus - rec.free
            items = [(lost[v.id], v.placement[name], v.id, v) for v in victims]
            found = _cover(items, need)
            if found is None:
                continue
            cost, subset = found
            # A gang victim frees all its GPUs, not only those here: count them all.
            cost = (cost[0], sum(i[3].gpus for i in subset), cost[2], cost[3])
            leftover = rec.free + sum(i[1] for i in subset) - job.gpus
        key = (cost[0], cost[1], cost[2], leftover, rec.idx)
        if best is None or key < best[0]:
            best = (key, rec, [i[3] for i in subset])
    if best is None:
        return None
    key, rec, victims = best
    return VictimChoice([rec], sorted(victims, key=lambda v: v.id), key[0])


def _gang(job, by_node, lost, capacity, reserved) -> VictimChoice | None:
    per_node = job.per_node
    options: list[tuple[float, int, int, NodeRec, list[Job]]] = []
    for rec in capacity.whole_nodes(job.nodes, per_node, reserved):
        options.append((0.0, 0, rec.idx, rec, []))
    if len(options) < job.nodes:
        for name, victims in by_node.items():
            rec = capacity.by_name[name]
            if rec.gpus < per_node or not _usable(rec, reserved):
                continue
            ids = {v.id for v in victims}
            if any(wid not in ids for wid in rec.running):
                continue  # someone here may not be evicted: the node cannot be had whole
            # A gang victim spread over k nodes frees all of them: charge each node 1/k.
            cost = sum(lost[v.id] / v.nodes for v in victims)
            gpus = sum(rec.running.values())
            options.append((cost, gpus, rec.idx, rec, victims))
    if len(options) < job.nodes:
        return None
    options.sort(key=lambda o: (o[0], o[1], o[2]))
    chosen = sorted(options[: job.nodes], key=lambda o: o[2])
    victims: dict[str, Job] = {}
    for option in chosen:
        for v in option[4]:
            victims[v.id] = v
    total = sum(lost[v] for v in victims)
    return VictimChoice([o[3] for o in chosen], [victims[k] for k in sorted(victims)], total)
