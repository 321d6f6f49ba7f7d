"""What a hold does besides keeping new work off: it lends, it takes back, it moves.

A blocked workload at the head of its project's turn holds nodes (``walk_reserve.reserve``) so that
backfill cannot starve it. Held GPUs stand idle until the node has room for the holder, often
for hours; three rules put them to use without delaying the holder for long:

- **Loans.** Work whose protection is short (debug class: at most ``debug_min_runtime``,
  churn budget included) may start on the free GPUs of a node held for a pending workload.
  The run borrows: once past its protection it yields to the holder whenever evicting it lets
  the holder start, whatever the policy's ranks say. The holder therefore waits at most that
  protection beyond the moment its node would have been ready. A gang waits for every node
  it holds: longer work may borrow one of them when its protection ends no later than that of
  the work the gang already waits for on its held nodes (``hold_ready``). Such a loan delays
  the gang only when that work ends before its protection, and never past the moment that
  protection would have ended; a stream of loans cannot starve the gang, since borrowers do
  not count in ``hold_ready``. Work the gang may never evict (its own project's, of no lower
  class) has no such moment: the gang waits for it to end, whenever that is, so work of any
  length may borrow the other GPUs meanwhile and delays the gang by at most its protection
  beyond that end.
- **Recall.** A holder first tries to start by evicting its own borrowers that are past
  their protection (no break-even patience: the borrower agreed to yield).
- **Moves.** A single-node holder that has waited ``gang_reserve_after`` (the bound a gang
  waits before holding whole nodes) may empty a node by moving *one* preemptible workload
  (past its minimum runtime, or the free lane; never a gang) that fits in the free GPUs of
  another unheld node: it is requeued and restarts there at the next cycle, its team keeps
  its GPUs, it loses the work since its last checkpoint. This is KAI Scheduler's
  consolidation, limited to one move per start so that churn stays bounded.

Borrowers are remembered per holder on the scheduler (``Scheduler._loans``); a driver that
rebuilds the engine hands them back (``Start.loan_for`` / ``add_running(loan_for=...)``).
A loan stays a loan for the life of its run; it only matters while its holder is pending.

Holds take nodes emptiest first (``nodes_by_use``), an order kept on the scheduler across
walks and cycles.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from typing import TYPE_CHECKING

from scheduler.engine import reasons as words
from scheduler.engine import walk_victims
from scheduler.engine.model import NodeState
from scheduler.engine.placement import NodeRec
from scheduler.engine.preemption import VictimChoice, busy_cost, cover
from scheduler.engine.records import Job

if TYPE_CHECKING:
    from scheduler.engine.walk import Walk

NEVER = float("inf")  # ``hold_ready`` of a gang waiting for work it may never evict


def loanable(walk: Walk, job: Job) -> bool:
    """May ``job`` borrow held GPUs at all? Charged single-node work (how long its run may
    be protected depends on the hold: ``borrow``)."""
    return walk.s.policy.lends_holds and job.charged and job.nodes == 1


def hold_ready(walk: Walk, job: Job, nodes: list[int]) -> float:
    """When gang ``job`` holding ``nodes`` could first have them all by eviction: the latest
    protection of the work on them (its own borrowers aside, they yield), or now. Infinite
    when one of them runs work the gang may never evict, its own project's work of no lower
    class (``walk_victims.may_evict_own``): the gang then waits for that work to end, a
    moment nobody knows, and any loan ends its protection before it."""
    run, cap = walk.s._run, walk.cap
    own_class = (-job.w.priority, job.mr)
    ready = walk.now
    for idx in nodes:
        for wid in cap.nodes[idx].running:
            v = run[wid]
            if v.loan_for is not None:
                continue
            if v.charged and v.project == job.project and (-v.w.priority, v.mr) <= own_class:
                return NEVER
            if v.protected_until > ready:
                ready = v.protected_until
    return ready


def may_borrow_later_held(walk: Walk, job: Job) -> bool:
    """Could ``job`` borrow a held node now where it could not before, with nothing logged
    since (``Walk._try``'s memo of a failed search)? Only longer work can: it may borrow a
    gang's node when its protection ends no later than the gang's ``hold_ready``, and a
    hold's ``hold_ready`` grows without an entry in the opportunity log when work starts
    on the node before the gang holds it again in a later walk. Short work borrows free
    GPUs of held nodes whatever the holder waits for, and those only grow with an entry."""
    if not walk.reserved or not loanable(walk, job):
        return False
    protection = walk.s.protection(job)
    if protection <= walk.params.debug_min_runtime:
        return False
    return walk.now + protection <= walk.hold_ready_latest


def borrow(walk: Walk, job: Job) -> bool:
    """Start ``job`` on the fullest node held for a pending workload that has room for it,
    when its run's protection ends within what that hold allows (the module's docstring)."""
    s, cap, reserved = walk.s, walk.cap, walk.reserved
    if not reserved or cap.free_total < job.gpus:
        return False
    protection = s.protection(job)
    short = protection <= walk.params.debug_min_runtime
    ends = walk.now + protection
    if not short and ends > walk.hold_ready_latest:
        return False  # longer work borrows only from a gang that waits longer still
    ready = walk.hold_ready
    for free in range(job.gpus, cap.max_gpus + 1):
        for idx in cap.buckets[free]:
            holder = reserved.get(idx)
            if holder is not None and holder in s._pending:
                if not short and ends > ready.get(holder, walk.now):
                    continue
                rec = cap.nodes[idx]
                job.loan_for = holder
                walk._launch(
                    job,
                    [rec],
                    f"borrows free GPUs of {rec.name}, held for {holder} (yields to it once "
                    "past its minimum runtime)",
                )
                return True
    return False


def _recallable(walk: Walk, job: Job, rec: NodeRec) -> list[tuple[float, int, str, Job]] | None:
    """``job``'s borrowers on ``rec`` that it may evict now, as (lost, GPUs, id, run);
    None when ``rec`` cannot serve it (held for someone else, not healthy, owned by a gang)."""
    holder = walk.reserved.get(rec.idx)
    if holder is not None and holder != job.id:
        return None
    if rec.state != NodeState.HEALTHY or rec.exclusive is not None:
        return None
    run, now = walk.s._run, walk.now
    items = []
    for wid, gpus in rec.running.items():
        v = run[wid]
        if v.loan_for == job.id and v.start < now and v.protected_until <= now:
            items.append((walk._lost_of(v), gpus, wid, v))
    return items


def recall(walk: Walk, job: Job) -> bool:
    """Start ``job`` by evicting its own borrowers past their protection, if that suffices."""
    lent = walk.s._loans.get(job.id)
    if not lent:
        return False
    cap = walk.cap
    if job.nodes == 1:
        best: tuple[tuple, NodeRec, list[Job]] | None = None
        for idx in sorted(lent):
            rec = cap.nodes[idx]
            if rec.gpus < job.gpus:
                continue
            items = _recallable(walk, job, rec)
            if not items:
                continue
            found = cover(items, job.gpus - rec.free)
            if found is None:
                continue
            cost, subset = found
            key = (cost[0], cost[1], cost[2], cost[3], cost[4], idx)  # idle borrowers first
            if best is None or key < best[0]:
                best = (key, rec, [item[3] for item in subset])
        if best is None:
            return False
        key, rec, victims = best
        return _evict_for(walk, job, [rec], victims, key[2])
    held_by_others = [i for i, holder in walk.reserved.items() if holder != job.id]
    empty = cap.whole_nodes(job.nodes, job.per_node, held_by_others)
    if len(empty) >= job.nodes:
        return False  # it would have started on them: nothing to recall
    taken = {rec.idx for rec in empty}
    options: list[tuple[float, int, NodeRec, list[Job]]] = []
    for idx in sorted(lent):
        rec = cap.nodes[idx]
        if idx in taken or rec.gpus < job.per_node:
            continue
        items = _recallable(walk, job, rec)
        if not items or len(items) != len(rec.running):
            continue
        options.append((sum(item[0] for item in items), idx, rec, [item[3] for item in items]))
    if len(empty) + len(options) < job.nodes:
        return False
    # Nodes whose borrowers are idle first, then least work lost (``busy_cost``).
    options.sort(key=lambda o: (busy_cost([(walk._lost_of(v), v) for v in o[3]]), o[0], o[1]))
    chosen = options[: job.nodes - len(empty)]
    victims = [v for o in chosen for v in o[3]]
    nodes = sorted(empty + [o[2] for o in chosen], key=lambda r: r.idx)
    return _evict_for(walk, job, nodes, victims, sum(o[0] for o in chosen))


def _evict_for(walk: Walk, job: Job, nodes: list[NodeRec], victims: list[Job], lost: float) -> bool:
    if len(victims) > walk._preemptions_left():
        return False
    where = ", ".join(rec.name for rec in nodes)
    walk_victims.evict_and_start(
        walk,
        job,
        VictimChoice(nodes, sorted(victims, key=lambda v: v.id), lost),
        why=f"it borrowed GPUs held for {job.id}, which can now start on {where}",
    )
    return True


def move_for(walk: Walk, job: Job) -> bool:
    """Start single-node ``job`` on a node emptied by moving one preemptible workload into
    the free GPUs of another unheld node (see the module's docstring). Least work lost first,
    then fewest GPUs moved, then node and workload order; an idle workload before any busy one
    (``busy_cost``)."""
    if not walk.s.policy.consolidates or walk._preemptions_left() <= 0:
        return False
    cap, reserved, now = walk.cap, walk.reserved, walk.now
    run, free_lane = walk.s._run, walk.s.policy.free_lane
    # The two largest blocks of free GPUs outside held nodes: the moved workload goes to one
    # that is not on the node being emptied.
    largest = second = 0
    largest_at = -1
    for free in range(cap.max_gpus, 0, -1):
        for idx in cap.buckets[free]:
            if idx in reserved:
                continue
            if largest_at < 0:
                largest, largest_at = free, idx
            else:
                second = free
                break
        if second:
            break
    if not largest:
        return False
    g = job.gpus
    best: tuple[tuple[bool, float, int, int, str], NodeRec, Job] | None = None
    # A node with f free GPUs needs g - f more; the moved workload is at most ``largest``.
    for free in range(g - 1, max(g - largest, 1) - 1, -1):
        for idx in cap.buckets[free]:
            if idx in reserved:
                continue
            rec = cap.nodes[idx]
            if rec.gpus < g:
                continue
            room = second if idx == largest_at else largest
            need = g - free
            for wid, gpus in rec.running.items():
                if gpus < need or gpus > room:
                    continue
                v = run[wid]
                if v.nodes > 1 or v.start >= now:
                    continue
                if not (v.evictable if v.charged else free_lane):
                    continue
                key = (not v.idle, walk._lost_of(v), gpus, idx, wid)
                if best is None or key < best[0]:
                    best = (key, rec, v)
    if best is None:
        return False
    key, rec, victim = best
    # The wait began when the workload first came to the head blocked (``waited_bound`` set
    # it); 0.0 is a real instant, the start of a replay, not "never".
    since = job.head_since if job.head_since is not None else now
    walk_victims.evict_and_start(
        walk,
        job,
        VictimChoice([rec], [victim], key[1]),
        why=(
            f"moved to empty {rec.name} for {job.id}, which waited "
            f"{words.duration(now - since)} blocked; it fits in free GPUs "
            "of another node and is requeued to restart there"
        ),
    )
    return True


def hold_single(walk: Walk, job: Job) -> NodeRec | None:
    """The node a blocked single-node ``job`` holds: the most free GPUs (its own borrowers
    count as free, so a hold that lent its GPUs stays where it is), first by position."""
    cap, reserved = walk.cap, walk.reserved
    rec = cap.most_free_node(job.gpus, reserved)
    lent = walk.s._loans.get(job.id)
    if not lent:
        return rec
    best = (rec.free, -rec.idx) if rec is not None else (0, 0)
    for idx, gpus in sorted(lent.items()):
        candidate = cap.nodes[idx]
        if idx in reserved or not candidate.schedulable or candidate.gpus < job.gpus:
            continue
        key = (candidate.free + gpus, -idx)
        if key > best:
            best, rec = key, candidate
    return rec


def hold_gang(walk: Walk, job: Job) -> list[int] | None:
    """The nodes a blocked gang holds: the first ``job.nodes`` unheld nodes with room for its
    share in the order of ``nodes_by_use`` (emptiest first), with the GPUs its own
    borrowers use counted as free; None when there are not enough."""
    reserved, per_node, wanted = walk.reserved, job.per_node, job.nodes
    cap = walk.cap
    chosen: list[int] = []
    for idx in _hold_order(walk, walk.s._loans.get(job.id)):
        if idx not in reserved and cap.nodes[idx].gpus >= per_node:
            chosen.append(idx)
            if len(chosen) == wanted:
                return chosen
    return None


def _hold_order(walk: Walk, lent: dict[int, int] | None) -> Iterator[int]:
    """Node positions in ``nodes_by_use`` order, the nodes in ``lent`` moved forward by
    the GPUs lent on them. Only those few move: they are merged into the kept order, which is
    read only as far as the caller needs."""
    order = nodes_by_use(walk)
    if not lent:
        for key in order:
            yield key[2]
        return
    cap = walk.cap
    moved: list[tuple] = []
    for idx, gpus in lent.items():
        rec = cap.nodes[idx]
        if rec.state == NodeState.HEALTHY:
            used = rec.gpus if rec.exclusive is not None else rec.gpus - rec.free
            moved.append((used - gpus, busy_until(walk, rec), idx))
    moved.sort()
    m = 0
    for key in order:
        idx = key[2]
        if idx in lent:
            continue
        while m < len(moved) and moved[m] < key:
            yield moved[m][2]
            m += 1
        yield idx
    for _, _, lent_idx in moved[m:]:
        yield lent_idx


def nodes_by_use(walk: Walk) -> list[tuple]:
    """Healthy nodes as (GPUs in use, busy until, position), sorted: emptiest first, then
    the node whose work becomes preemptible soonest (``busy_until``), then position.

    Kept on the scheduler across walks and cycles: only the nodes the capacity index
    re-filed since (``Capacity.touched``) are moved, so the gangs of several groups and
    cycles share one order and a start costs a re-filing, not a sort of the cluster.
    Positions are unique, so the kept order is exactly the one a full sort gives.
    """
    if walk._by_use is not None:
        return walk._by_use
    s, cap = walk.s, walk.cap
    keys = s._by_use
    touched = cap.touched
    if keys is None or not s.incremental or len(touched) > len(cap.nodes):
        keys = sorted(use_key(walk, rec) for rec in cap.nodes if rec.state == NodeState.HEALTHY)
        s._by_use_of = {key[2]: key for key in keys}
    elif touched:
        of = s._by_use_of
        for idx in set(touched):
            old = of.pop(idx, None)
            if old is not None:
                del keys[bisect_left(keys, old)]
            rec = cap.nodes[idx]
            if rec.state == NodeState.HEALTHY:
                key = of[idx] = use_key(walk, rec)
                insort(keys, key)
    touched.clear()
    s._by_use = walk._by_use = keys
    return keys


def use_key(walk: Walk, rec: NodeRec) -> tuple:
    """``rec``'s place in ``nodes_by_use``: (GPUs in use, busy until, position)."""
    used = rec.gpus if rec.exclusive is not None else rec.gpus - rec.free
    return (used, busy_until(walk, rec), rec.idx)


def busy_until(walk: Walk, rec: NodeRec) -> float:
    """When the last protected workload on ``rec`` becomes preemptible (kept on the node
    until its work changes)."""
    until = rec.busy_until
    if until is None or not walk.s.incremental:
        run = walk.s._run
        until = max((run[w].protected_until for w in rec.running), default=float("-inf"))
        rec.busy_until = until
    return until
