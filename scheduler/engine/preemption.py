"""Choosing victims: the cheapest set of running workloads whose eviction lets a job start.

"Cheapest" is fewest GPU-seconds of work lost (see ``records.lost_gpu_seconds``), then fewest
GPUs evicted, then fewest workloads, then the fullest node (consolidation), then node name.
Only what lets the preemptor start is evicted: one node's worth for a single-node job, whole
nodes for a gang.

Idle runs go first (``Job.idle``, the driver's judgement): every cost here begins with the
work the set's *busy* victims lose and whether it has any (``busy_cost``), so a set of idle
victims comes before any set with a busy one, and sets with the same busy part compare as
before. With no idle run the busy part equals the whole loss (the same sums in the same
order), so the order is exactly the plain one.

The searches take an ``eligible(victim)`` predicate (the policy's rules, memoised per
search), a ``lost(victim)`` function and a ``limit(victim)`` (the victim's team and the most
GPUs one choice may take from that team in all, or None), so the policy stays out of this
module. ``eligible`` judges each victim alone; ``limit`` makes a set of victims of one team
count together: two runs that each fit in what a team borrows may not both go when together
they take the team below its entitlement.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass

from scheduler.engine.model import NodeState
from scheduler.engine.placement import Capacity, NodeRec
from scheduler.engine.records import Job

Eligible = Callable[[Job], bool]
Lost = Callable[[Job], float]
Limit = Callable[[Job], tuple[str, int] | None]


def busy_cost(victims: Iterable[tuple[float, Job]]) -> tuple[float, int]:
    """The idle-first prefix of a victim set's cost: (work its busy victims lose, 1 if it has
    a busy victim else 0), from (lost, victim) pairs. Idle victims count for nothing here,
    so any set of idle victims sorts before any set holding a busy one."""
    lost = 0.0
    busy = 0
    for value, victim in victims:
        if not victim.idle:
            lost += value
            busy = 1
    return lost, busy


@dataclass(slots=True)
class VictimChoice:
    """Where the preemptor goes and whom it evicts (victims sorted by id)."""

    nodes: list[NodeRec]
    victims: list[Job]
    lost: float


@dataclass(slots=True)
class SearchResult:
    """The cheapest choice, or None when no eligible set lets the job start."""

    choice: VictimChoice | None


def cover(
    items: list[tuple[float, int, str, Job]], need: int, limit: Limit | None = None
) -> tuple | None:
    """Cheapest subset of ``items`` (lost, gpus, id, job) freeing at least ``need`` GPUs,
    taking from no team more than its ``limit``.

    A small knapsack: states are GPUs freed so far (capped at ``need``), each keeping its
    cheapest (busy lost, any busy, lost, GPUs, count, ids) cost (``busy_cost``: idle victims
    first). Items on one node are few, so this is exact and cheap.
    """
    if need <= 0:
        return (0.0, 0, 0.0, 0, 0, ()), ()
    if sum(i[1] for i in items) < need:
        return None
    if limit is not None:
        binding = _binding_limits(items, limit)
        if binding:
            return _cover_within(items, need, limit, binding)
    if len(items) == 1:
        item = items[0]
        busy = busy_cost(((item[0], item[3]),))
        return (busy[0], busy[1], item[0], item[1], 1, (item[2],)), (item,)
    states: dict[int, tuple[tuple, tuple]] = {0: ((0.0, 0, 0.0, 0, 0, ()), ())}
    for item in sorted(items, key=lambda i: i[2]):
        lost, gpus, wid, victim = item
        idle = victim.idle
        for freed, (cost, subset) in list(states.items()):
            if freed >= need:
                continue
            reach = min(need, freed + gpus)
            new = _grow(cost, lost, gpus, wid, idle)
            old = states.get(reach)
            if old is None or new < old[0]:
                states[reach] = (new, (*subset, item))
    return states.get(need)


def _grow(cost: tuple, lost: float, gpus: int, wid: str, idle: bool) -> tuple:
    """``cover``'s cost ``cost`` with one more victim (``lost``, ``gpus``, ``wid``)."""
    busy_lost = cost[0] if idle else cost[0] + lost
    busy = cost[1] if idle else 1
    return (busy_lost, busy, cost[2] + lost, cost[3] + gpus, cost[4] + 1, (*cost[5], wid))


def _binding_limits(items: list[tuple[float, int, str, Job]], limit: Limit) -> dict[str, int]:
    """The teams whose limit ``items`` could break (their GPUs among the items sum above
    it), each with its limit; empty when any subset of the items respects every limit."""
    total: dict[str, int] = {}
    caps: dict[str, int] = {}
    for item in items:
        found = limit(item[3])
        if found is not None:
            team, cap = found
            caps[team] = cap
            total[team] = total.get(team, 0) + item[1]
    return {team: caps[team] for team, gpus in total.items() if gpus > caps[team]}


def _cover_within(
    items: list[tuple[float, int, str, Job]], need: int, limit: Limit, binding: dict[str, int]
) -> tuple | None:
    """``cover`` when some team's limit binds: states are (GPUs freed, GPUs taken from each
    binding team), so the answer is still the exact cheapest subset that respects them."""
    teams = sorted(binding)
    slot = {team: i for i, team in enumerate(teams)}
    empty = (0,) * len(teams)
    states: dict[tuple[int, tuple[int, ...]], tuple[tuple, tuple]] = {
        (0, empty): ((0.0, 0, 0.0, 0, 0, ()), ())
    }
    for item in sorted(items, key=lambda i: i[2]):
        lost, gpus, wid, victim = item
        found = limit(victim)
        i = slot.get(found[0]) if found is not None else None
        for (freed, taken), (cost, subset) in list(states.items()):
            if freed >= need:
                continue
            if i is not None:
                if taken[i] + gpus > binding[teams[i]]:
                    continue
                taken = (*taken[:i], taken[i] + gpus, *taken[i + 1 :])
            key = (min(need, freed + gpus), taken)
            new = _grow(cost, lost, gpus, wid, victim.idle)
            old = states.get(key)
            if old is None or new < old[0]:
                states[key] = (new, (*subset, item))
    done = [found for (freed, _), found in states.items() if freed >= need]
    return min(done, key=lambda f: f[0]) if done else None


def node_option(
    job: Job,
    rec: NodeRec,
    run: dict[str, Job],
    eligible: Eligible,
    lost: Lost,
    limit: Limit | None = None,
) -> tuple[tuple, list[Job]] | None:
    """The cheapest way to fit single-node ``job`` on ``rec`` by evicting, or None.

    Returns ((busy lost, any busy, lost, GPUs evicted, count, leftover GPUs, node
    position), victims): idle victims first (``busy_cost``).
    """
    if rec.state != NodeState.HEALTHY or rec.gpus < job.gpus:
        return None
    if rec.exclusive is not None:
        owner = run.get(rec.exclusive)
        if owner is None or not eligible(owner):
            return None
        leftover = rec.free + rec.running[owner.id] - job.gpus
        owner_lost = lost(owner)
        busy = busy_cost(((owner_lost, owner),))
        return (busy[0], busy[1], owner_lost, owner.gpus, 1, leftover, rec.idx), [owner]
    need = job.gpus - rec.free
    items = []
    for wid, gpus in rec.running.items():
        victim = run[wid]
        if eligible(victim):
            items.append((lost(victim), gpus, wid, victim))
    if not items:
        return None
    found = cover(items, need, limit)
    if found is None:
        return None
    cost, subset = found
    leftover = rec.free + cost[3] - job.gpus
    return (cost[0], cost[1], cost[2], cost[3], cost[4], leftover, rec.idx), [i[3] for i in subset]


def single_node_search(
    job: Job,
    pool: Iterable[tuple[float, str, Job]],
    run: dict[str, Job],
    capacity: Capacity,
    reserved: Container[int],
    eligible: Eligible,
    lost: Lost,
    only: Iterable[int] | None = None,
    limit: Limit | None = None,
    prune: bool = True,
) -> SearchResult:
    """Best node for a single-node ``job`` after evictions.

    ``pool`` lists every potentially preemptible running workload as (lost per GPU, id,
    job), cheapest first. A node is first examined at its cheapest eligible victim, and any
    node needs at least ``need_min`` GPUs freed, so an unexamined node costs at least
    ``need_min`` x the current victim's lost-per-GPU: once that exceeds the best option
    found, the search stops. That bound holds only while no run is idle (an idle victim's
    node may be the best whatever it loses): ``prune=False`` examines every node with an
    eligible victim. ``only`` restricts the search to those node positions (those
    that changed since the job last failed: the others cannot have become feasible).
    """
    best: tuple[tuple, NodeRec, list[Job]] | None = None
    nodes = capacity.nodes
    need_min = max(1, job.gpus - capacity.largest_free(()))

    def consider(rec: NodeRec) -> None:
        nonlocal best
        if rec.idx in reserved:
            return  # held for a higher-ranked workload
        option = node_option(job, rec, run, eligible, lost, limit)
        if option is None:
            return
        if best is None or option[0] < best[0]:
            best = (option[0], rec, option[1])

    if only is not None:
        for idx in sorted(set(only)):
            consider(nodes[idx])
    else:
        seen: set[int] = set()
        for per_gpu, _, victim in pool:
            if prune and best is not None and per_gpu * need_min > best[0][0]:
                break
            if not victim.running or not eligible(victim):
                continue
            for name in victim.placement:
                rec = capacity.by_name[name]
                if rec.idx not in seen:
                    seen.add(rec.idx)
                    consider(rec)
    if best is None:
        return SearchResult(None)
    key, rec, victims = best
    return SearchResult(VictimChoice([rec], sorted(victims, key=lambda v: v.id), key[2]))


def gang_search(
    job: Job,
    pool: Iterable[tuple[float, str, Job]],
    run: dict[str, Job],
    capacity: Capacity,
    reserved: Container[int],
    eligible: Eligible,
    lost: Lost,
    limit: Limit | None = None,
) -> SearchResult:
    """Cheapest ``job.nodes`` whole nodes for a gang: empty ones first, then clearable ones.

    A node is clearable when every workload on it is eligible. A gang victim spread over k
    nodes frees all of them, so each of its nodes is charged 1/k of its lost work when
    ranking nodes; nodes whose victims are all idle come first (``busy_cost``). Nodes are
    taken cheapest first, skipping one whose work would take a team past its ``limit``
    together with the nodes already taken.
    """
    per_node = job.per_node
    options: list[tuple[tuple[float, int], float, int, int, NodeRec, list[Job]]] = []
    for rec in capacity.whole_nodes(job.nodes, per_node, reserved):
        options.append(((0.0, 0), 0.0, 0, rec.idx, rec, []))
    if len(options) < job.nodes:
        seen: set[int] = set()
        for _, _, victim in pool:
            if not victim.running or not eligible(victim):
                continue
            for name in victim.placement:
                rec = capacity.by_name[name]
                if rec.idx in seen:
                    continue
                seen.add(rec.idx)
                if rec.state != NodeState.HEALTHY or rec.gpus < per_node or rec.idx in reserved:
                    continue
                victims = [run[w] for w in rec.running]
                if not all(eligible(v) for v in victims):
                    continue
                shares = [(lost(v) / v.nodes, v) for v in victims]
                cost = sum(share for share, _ in shares)
                busy = busy_cost(shares)
                options.append((busy, cost, sum(rec.running.values()), rec.idx, rec, victims))
    if len(options) < job.nodes:
        return SearchResult(None)
    options.sort(key=lambda o: (o[0], o[1], o[2], o[3]))
    if limit is None:
        picked = options[: job.nodes]
    else:
        picked = _within_limits(options, job.nodes, limit)
        if len(picked) < job.nodes:
            return SearchResult(None)
    chosen = sorted(picked, key=lambda o: o[3])
    victims_by_id: dict[str, Job] = {}
    for option in chosen:
        for v in option[5]:
            victims_by_id[v.id] = v
    total = sum(lost(v) for v in victims_by_id.values())
    return SearchResult(
        VictimChoice(
            [o[4] for o in chosen], [victims_by_id[k] for k in sorted(victims_by_id)], total
        )
    )


def _within_limits(
    options: list[tuple[tuple[float, int], float, int, int, NodeRec, list[Job]]],
    count: int,
    limit: Limit,
) -> list[tuple[tuple[float, int], float, int, int, NodeRec, list[Job]]]:
    """The first ``count`` of ``options`` (cheapest first) whose victims, counted once each
    over every node taken, take no team past its limit; fewer if there are not enough."""
    picked = []
    taken: dict[str, int] = {}
    seen: set[str] = set()
    for option in options:
        extra: dict[str, int] = {}
        caps: dict[str, int] = {}
        for v in option[5]:
            if v.id in seen:
                continue
            found = limit(v)
            if found is not None:
                team, caps[team] = found
                extra[team] = extra.get(team, 0) + v.gpus
        if any(taken.get(team, 0) + gpus > caps[team] for team, gpus in extra.items()):
            continue
        for team, gpus in extra.items():
            taken[team] = taken.get(team, 0) + gpus
        seen.update(v.id for v in option[5])
        picked.append(option)
        if len(picked) == count:
            break
    return picked
