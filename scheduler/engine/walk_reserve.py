"""What the walk does for the first blocked workload of a group's turn.

It holds capacity so backfill cannot delay it (``reserve``, with the holds themselves in
``holds.py``); past the hold bound a single-node workload may reclaim one step beyond its
team's entitlement (``reclaim_one_step``) and a gang may have whole nodes cleared for it
(``clear_for_gang``). Each function takes the ``Walk`` of the cycle (``walk.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.engine import holds, walk_victims
from scheduler.engine.model import NodeState
from scheduler.engine.placement import NodeRec
from scheduler.engine.preemption import VictimChoice, busy_cost, single_node_search
from scheduler.engine.records import Job

if TYPE_CHECKING:
    from scheduler.engine.walk import Walk


def reserve(walk: Walk, job: Job) -> None:
    """Hold capacity for the first blocked workload of a group so backfill cannot delay it.

    A single-node workload blocked by fragmentation holds the node with the most free
    GPUs; with a policy that consolidates, once it has waited ``gang_reserve_after`` at
    the head of its group it may instead empty a node by moving one workload
    (``holds.move_for``). A gang holds whole nodes only after waiting the same bound
    (reserving many nodes idles them, so give packing a chance first); it picks empty
    nodes first, then those whose work may be preempted soonest.
    Holds stop when ``max_reserved_fraction`` of healthy nodes are held; a gang's wait
    and the clearing of nodes for it do not stop with them.
    """
    reserved = walk.reserved
    s = walk.s
    if job.nodes == 1:
        consolidates = s.policy.consolidates and job.charged
        if (
            consolidates
            and waited_bound(walk, job)
            and (holds.move_for(walk, job) or reclaim_one_step(walk, job))
        ):
            return
        if len(reserved) >= walk.reserve_budget:
            return
        rec = holds.hold_single(walk, job)
        if rec is not None and rec.gpus >= job.gpus:
            reserved[rec.idx] = job.id
        return
    # A gang's wait and its right to have nodes cleared do not depend on the cap on
    # held nodes: clearing holds nothing, and a gang that could not hold because other
    # work held the cap would otherwise never start its wait.
    if not waited_bound(walk, job):
        return
    if s.policy.preempts and job.charged and clear_for_gang(walk, job):
        return
    if len(reserved) + job.nodes > walk.reserve_budget:
        return
    chosen = holds.hold_gang(walk, job)
    if chosen is not None:
        for held in chosen:
            reserved[held] = job.id
        ready = walk.hold_ready[job.id] = holds.hold_ready(walk, job, chosen)
        walk.hold_ready_latest = max(walk.hold_ready_latest, ready)


def reclaim_one_step(walk: Walk, job: Job) -> bool:
    """Start a single-node workload that waited past the hold bound by reclaiming, when
    its team is below its entitlement but the workload alone takes the team past it.

    The guarantee's reclaim asks that the team stay within its entitlement after the
    start, so a team whose smallest workload is larger than what it is still owed could
    never reclaim: one workload is the smallest step it can take (as for a gang,
    ``clear_for_gang``). The victims are judged as for any reclaim, all of a team's
    together (no team goes below its entitlement), so the team that overshoots cannot be
    reclaimed from by its victims, and the workload itself is larger than what its team
    then runs above its entitlement: it cannot be the victim of a reclaim either.
    """
    view, s = walk.view, walk.s
    if not s.policy.preempts or view.may_reclaim(job) or not view.may_clear_for_gang(job):
        return False
    if walk._preemptions_left() <= 0:
        return False
    # Memo of a failure, as for a gang (``clear_for_gang``): a node only becomes
    # clearable through an entry in the opportunity log or a hold let go, and a victim
    # only becomes admissible when its team's room grows. Not for debug-class work,
    # whose own-project victims move with the debug allowance.
    memo = s.incremental and job.mr > walk.params.debug_min_runtime
    room = view.reclaimable() if memo else {}
    log_len = len(s._opp_log)
    held = tuple(sorted(walk.reserved))
    eligible = walk_victims.eligible_for(walk, job, reclaim=True)
    only = None
    if memo and job.clear_pos >= 0:
        # Only nodes logged since, let go by a hold, or running work of a team whose room
        # grew can serve now (``grown_nodes``: None when that is much of the cluster).
        grown = [p for p, gpus in room.items() if gpus > job.clear_room.get(p, 0)]
        only = walk_victims.fresh_nodes(walk, job.clear_pos, eligible)
        if grown:
            only = walk_victims.grown_nodes(walk, grown, job, only)
        if only is not None:
            only += [i for i in job.clear_held if i not in held]
            if not only:
                if grown or log_len > job.clear_pos:  # as a search of no node would: failed
                    job.clear_pos, job.clear_room, job.clear_held = log_len, room, held
                return False
    found = single_node_search(
        job,
        walk_victims.victim_pool(walk, job, reclaim=True) if only is None else (),
        s._run,
        walk.cap,
        walk.reserved,
        eligible,
        walk._lost_of,
        only,
        walk_victims.limit_for(walk, job),
        not s._idle_runs,  # prune: see ``walk_victims.search``
    )
    choice = found.choice
    if choice is None:
        if memo:  # every node is known not to serve now, under rooms as large as now
            job.clear_pos, job.clear_room, job.clear_held = log_len, room, held
        return False
    if len(choice.victims) > walk._preemptions_left():
        return False
    walk_victims.evict_and_start(walk, job, choice)
    return True


def waited_bound(walk: Walk, job: Job) -> bool:
    """Has ``job`` waited ``gang_reserve_after`` blocked at the head of its group? Its
    wait starts now if it had not; until the bound, the scheduler wakes when it ends."""
    if job.head_since is None:
        job.head_since = walk.now
    due = job.head_since + walk.params.gang_reserve_after
    if walk.now < due:
        walk.s._set_timer(due)
        return False
    return True


def clear_for_gang(walk: Walk, job: Job) -> bool:
    """Start a gang that waited past its bound by clearing whole nodes, if allowed now.

    The guarantee serves gangs too: a gang of a team below its entitlement takes empty
    nodes and nodes whose work it may evict (past its minimum runtime: what other teams
    run above their entitlement, the free lane, or its own project's lower class). Nodes
    are taken fewest GPU-hours lost first, skipping any whose eviction would take a team
    below its entitlement together with the nodes already taken (``gang_victims_ok``),
    so one team that cannot spare its work does not keep the gang waiting while other
    nodes could serve it.
    """
    view = walk.view
    if not view.may_clear_for_gang(job) or walk._preemptions_left() <= 0:
        return False
    s = walk.s
    log = s._opp_log
    # Memo of a failure: a node only becomes clearable through an entry in the
    # opportunity log (work on it stopped or passed its minimum runtime, free-lane work
    # landed, its state changed), and only becomes admissible on its own when a team's
    # room to be reclaimed from grows. If too few nodes were admissible at the last
    # failure, even counting every node logged since, and no team has more room, this
    # attempt fails too. A debug-class gang's own-project victims depend on the debug
    # allowance, which moves without a log entry: no memo for it.
    memo = s.incremental and job.mr > walk.params.debug_min_runtime
    room = view.reclaimable() if memo else {}
    if memo and job.clear_pos >= 0:
        fresh = log[job.clear_pos :]
        old = job.clear_room
        if job.clear_count + min(len(fresh), len(set(fresh))) < job.nodes and all(
            gpus <= old.get(p, 0) for p, gpus in room.items()
        ):
            return False
    log_len = len(log)
    admissible, options = clear_options(walk, job)
    if admissible < job.nodes:
        if memo:
            job.clear_pos, job.clear_count, job.clear_room = log_len, admissible, room
        return False
    if len(options) < job.nodes:
        return False
    # Nodes whose work is idle first (the busy part of their loss; equal to the whole
    # loss when nothing on them is idle, so the plain order without idle runs).
    options.sort(key=lambda o: (busy_cost([(walk._lost_of(v), v) for v in o[3]])[0], o[0], o[1]))
    chosen = []
    taken: dict[str, int] = {}
    for option in options:
        cross = option[4]
        if cross:
            total = {p: taken.get(p, 0) + gpus for p, gpus in cross.items()}
            if not view.gang_victims_ok(job, total):
                continue
            taken.update(total)
        chosen.append(option)
        if len(chosen) == job.nodes:
            break
    if len(chosen) < job.nodes:
        return False
    evict = sorted((v for o in chosen for v in o[3]), key=lambda v: v.id)
    if len(evict) > walk._preemptions_left():
        return False
    nodes = sorted((o[2] for o in chosen), key=lambda r: r.idx)
    walk_victims.evict_and_start(walk, job, VictimChoice(nodes, evict, sum(o[0] for o in chosen)))
    return True


def clear_options(
    walk: Walk, job: Job
) -> tuple[int, list[tuple[float, int, NodeRec, list[Job], dict[str, int]]]]:
    """The nodes gang ``job`` may clear now: (how many are admissible, reserved ones
    included; the unreserved ones as (lost, position, node, its workloads, other teams'
    charged GPUs on it)). See ``clear_for_gang``."""
    s, view, now, reserved = walk.s, walk.view, walk.now, walk.reserved
    eligible = walk_victims.eligible_for(walk, job)
    free_lane = s.policy.free_lane

    def clearable(victim: Job) -> bool:
        if victim.start >= now or victim.nodes > 1:
            return False  # never undo a start of this cycle; a gang victim is not split
        if not victim.charged:
            return free_lane
        if victim.project == job.project:
            return eligible(victim)
        return victim.evictable

    options: list[tuple[float, int, NodeRec, list[Job], dict[str, int]]] = []
    admissible = 0  # reserved nodes included: the memo must not depend on them
    skip_hard = s.incremental  # the reference looks at every workload on every node
    for rec in walk.cap.nodes:
        if (skip_hard and rec.hard) or rec.state != NodeState.HEALTHY:
            continue
        if rec.gpus < job.per_node:
            continue
        on_node = [s._run[w] for w in rec.running]
        blocked = False
        for v in on_node:
            if not clearable(v):
                blocked = True
                break
        if blocked:
            continue
        cross: dict[str, int] = {}
        for v in on_node:
            if v.charged and v.project != job.project:
                cross[v.project] = cross.get(v.project, 0) + v.gpus
        if cross and not view.gang_victims_ok(job, cross):
            continue
        admissible += 1
        if rec.idx not in reserved:
            lost = sum(walk._lost_of(v) for v in on_node)
            options.append((lost, rec.idx, rec, on_node, cross))
    return admissible, options
