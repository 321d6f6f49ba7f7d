"""Whom a blocked workload may evict, and the cheapest set: the walk's preemption step.

The victim rule (``eligible_for``), the pools of preemptible work cheapest first
(``victim_pool``), which nodes a retry of a failed search needs to look at (``fresh_nodes``,
``grown_nodes``), the search itself and the eviction (``preempt``, ``evict_and_start``).
Each function takes the ``Walk`` of the cycle (``walk.py``) and reads its indexes.
"""

from __future__ import annotations

import heapq
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING

from scheduler.engine import reasons as words
from scheduler.engine.model import Preemption
from scheduler.engine.preemption import (
    SearchResult,
    VictimChoice,
    gang_search,
    single_node_search,
)
from scheduler.engine.records import Job

if TYPE_CHECKING:
    from scheduler.engine.state import QueueEntry
    from scheduler.engine.walk import Walk, _Shape


def pool_of(walk: Walk, key: str | None) -> list[tuple[float, str, Job]]:
    """Preemptible running work of one project (``None``: the free lane), cheapest
    lost-per-GPU first; built once a cycle per project, on first use."""
    pool = walk._pools.get(key)
    if pool is None:
        s = walk.s
        jobs = s._free_running.values() if key is None else s._evictable[key].values()
        pool = walk._pools[key] = sorted((walk._lost_of(j) / j.gpus, j.id, j) for j in jobs)
    return pool


def group_may_preempt(walk: Walk, group: str, shapes: dict[_Shape, list[QueueEntry]]) -> bool:
    """Could some head of ``group`` evict anyone (free lane aside)? Cheap and permissive.
    Asked again by a later pass of the same walk, it answers from memory unless the walk
    started or evicted something since (nothing else it reads changes inside a walk)."""
    stamp = (len(walk.result.starts), len(walk.result.preemptions))
    seen = walk._may_preempt_seen.get(group)
    if seen is not None and (seen[0], seen[1]) == stamp:
        return seen[2]
    answer = group_may_preempt_now(walk, group, shapes)
    walk._may_preempt_seen[group] = (stamp[0], stamp[1], answer)
    return answer


def group_may_preempt_now(walk: Walk, group: str, shapes: dict[_Shape, list[QueueEntry]]) -> bool:
    """``group_may_preempt`` without the memory: the policy's cheap test, or a head that
    outranks its own project's evictable work."""
    s = walk.s
    if s._evictable and walk.view.group_may_reclaim(group):
        return True
    if group not in s._evictable:
        return False
    for heap in shapes.values():
        job = s._head(heap)
        if job is not None and may_evict_own(walk, job):
            return True
    return False


def may_find_victims(walk: Walk, job: Job) -> bool:
    """Cheap gate before any search: could anyone at all be a victim of ``job``?"""
    s = walk.s
    if s.policy.free_lane and s._free_running:
        return True
    if job.project in s._evictable and may_evict_own(walk, job):
        return True
    return bool(s._evictable) and walk.view.may_reclaim(job)


def may_evict_own(walk: Walk, job: Job) -> bool:
    """Does ``job``'s project run evictable work of a lower class than ``job`` (class:
    priority, then minimum runtime; a project's own work yields only to a higher one)?"""
    worst_priority, worst_mr = own_worst(walk, job.project)
    own = -job.w.priority
    return worst_priority > own or (worst_priority == own and worst_mr > job.mr)


def own_worst(walk: Walk, project: str) -> tuple[int, float]:
    """The lowest class (priority, minimum runtime) among a project's evictable work
    (kept on the scheduler until the project's evictable work changes)."""
    s = walk.s
    if not s.incremental:
        return max((-j.w.priority, j.mr) for j in s._evictable[project].values())
    worst = s._worst_class.get(project)
    if worst is None:
        worst = s._worst_class[project] = max(s._evictable_classes[project])
    return worst


def victim_pool(
    walk: Walk, job: Job, reclaim: bool | None = None
) -> Iterable[tuple[float, str, Job]]:
    """Everything ``job`` might preempt, merged cheapest first, projects pre-filtered.

    Projects the policy refuses even for a one-GPU victim (the most permissive case)
    are left out before any of their workloads is looked at.
    """
    s, view = walk.s, walk.view
    sources = []
    if s.policy.free_lane and s._free_running:
        sources.append(pool_of(walk, None))
    if job.project in s._evictable and may_evict_own(walk, job):
        sources.append(pool_of(walk, job.project))
    if view.may_reclaim(job) if reclaim is None else reclaim:
        for project in sorted(s._evictable):
            if project != job.project and view.may_preempt_project(job, project, 1):
                sources.append(pool_of(walk, project))
    if len(sources) == 1:
        return sources[0]
    return heapq.merge(*sources)


def eligible_for(walk: Walk, job: Job, reclaim: bool | None = None):
    """The policy's victim rule for ``job``, memoised per victim project (``reclaim``:
    whether it may take other teams' work; by default the policy's ``may_reclaim``)."""
    view, now = walk.view, walk.now
    project = job.project
    free_lane = walk.s.policy.free_lane
    allowed: dict[tuple[str, int], bool] = {}
    if reclaim is None:
        reclaim = view.may_reclaim(job)

    def eligible(victim: Job) -> bool:
        if not victim.running or victim.start >= now:
            return False  # never undo a start of this same cycle
        if not victim.charged:
            return free_lane
        if not victim.evictable:
            return False
        if victim.project == project:
            return view.own_victim_ok(job, victim)
        if not reclaim:
            return False
        key = (victim.project, victim.gpus)
        ok = allowed.get(key)
        if ok is None:
            ok = allowed[key] = view.may_preempt_project(job, victim.project, victim.gpus)
        return ok

    return eligible


def fresh_nodes(walk: Walk, since: int, eligible) -> list[int]:
    """Node positions of the opportunity log from ``since`` on that may serve a job whose
    victim rule is ``eligible``. An entry made only because a workload passed its minimum
    runtime is left out when that workload is no victim of the job's: nothing else about
    its node changed, so the node is as it was when the job's search failed there (any
    other change on it has an entry of its own). Only for a policy whose signature
    follows every new victim (``PolicyView.victims_follow_signature``)."""
    s = walk.s
    log, why = s._opp_log, s._opp_why
    if not s.incremental or not walk.view.victims_follow_signature:
        return log[since:]  # the reference searches every node logged since
    run = s._run
    fresh: list[int] = []
    for i in range(since, len(log)):
        wid = why[i]
        if wid is None:
            fresh.append(log[i])
            continue
        # A workload that stopped since is no victim (its stop has an entry of its own).
        passed = run.get(wid)
        if passed is not None and eligible(passed):
            fresh.append(log[i])
    return fresh


def grown_nodes(walk: Walk, teams: list[str], job: Job, fresh: list[int]) -> list[int] | None:
    """``fresh`` plus the nodes running preemptible work of ``teams`` (other than
    ``job``'s own): where a search that failed can succeed once only those teams' room
    to be reclaimed from grew. None when that is a large part of the cluster (a full
    search is then as cheap)."""
    s = walk.s
    by_name = walk.cap.by_name
    limit = len(walk.cap.nodes) // 2
    nodes = set(fresh)
    for team in set(teams):
        if team == job.project:
            continue
        for victim in s._evictable.get(team, {}).values():
            for name in victim.placement:
                nodes.add(by_name[name].idx)
        if len(nodes) > limit:
            return None
    return sorted(nodes)


def limit_for(walk: Walk, job: Job):
    """The policy's limit on what one choice of ``job`` takes from each other team
    (``PolicyView.reclaim_limit``), memoised per team, as the searches' ``limit``."""
    view, project = walk.view, job.project
    limits: dict[str, int | None] = {}

    def limit(victim: Job) -> tuple[str, int] | None:
        if not victim.charged or victim.project == project:
            return None
        team = victim.project
        if team in limits:
            cap = limits[team]
        else:
            cap = limits[team] = view.reclaim_limit(job, team)
        return None if cap is None else (team, cap)

    return limit


def search(
    walk: Walk, job: Job, only: list[int] | None, eligible, skip: Container[int]
) -> SearchResult:
    """The cheapest victim set for ``job`` under its rule ``eligible``, leaving out the
    nodes in ``skip`` (``only``: for a single-node job, just these node positions)."""
    pool = victim_pool(walk, job) if only is None else ()
    limit = limit_for(walk, job)
    run, cap, lost = walk.s._run, walk.cap, walk._lost_of
    if job.nodes == 1:
        # While some run is idle the pool's lost-per-GPU order bounds nothing: an idle
        # victim's node may be the best whatever it loses (``single_node_search``).
        prune = not walk.s._idle_runs
        return single_node_search(job, pool, run, cap, skip, eligible, lost, only, limit, prune)
    return gang_search(job, pool, run, cap, skip, eligible, lost, limit)


def recheck(walk: Walk, jobs: list[Job]) -> bool:
    """Search again, as each one's turn in an unchanged walk would, for ``jobs``: pending
    workloads whose failed search's memo ran out (``state_quiet.rechecks_fail``). True
    when none finds a victim set; their memos are then renewed as of now.

    The nodes held when a search last failed stay out of it (``fail_held``: the walk
    would hold them, and maybe more, before that turn), so no search here looks at fewer
    nodes than the walk's would: when all fail here, the walk's fail too.
    """
    for job in jobs:
        if not may_find_victims(walk, job):
            continue
        if search(walk, job, None, eligible_for(walk, job), job.fail_held).choice is not None:
            return False
    log_len = len(walk.s._opp_log)
    for job in jobs:
        job.fail_time = walk.now
        job.fail_pos = log_len
        job.fail_sig = walk.view.signature(job)
    return True


def preempt(walk: Walk, job: Job, only: list[int] | None, eligible) -> tuple[bool, bool]:
    """Start ``job`` by evicting the cheapest eligible set, if one exists.

    ``only``: search just these node positions (the rest cannot have become feasible
    since the job last failed). ``eligible``: ``eligible_for(walk, job)``. Returns (started,
    a reserved node could have served).
    """
    s = walk.s
    choice = search(walk, job, only, eligible, walk.reserved).choice
    if choice is not None and len(choice.victims) > walk._preemptions_left():
        return False, True  # over this cycle's eviction budget: try again next cycle
    if choice is None:
        return False, False
    # Break-even patience: an eviction throws away ``choice.lost`` GPU-seconds; waiting
    # costs the preemptor its GPUs x the wait. Evict only once the wait has cost as much
    # as the eviction would lose: work that frees GPUs before then (on a busy cluster,
    # something ends every few minutes) serves the job without losing anyone's work.
    # The free lane agreed to be evicted at any moment: its loss does not count.
    if s.policy.patient:
        charged_lost = sum(walk._lost_of(v) for v in choice.victims if v.charged)
        patience = charged_lost / job.gpus
        if job.mr <= walk.params.debug_min_runtime:
            # A person at a prompt waits for a slot to free up to about as long as the
            # protection they asked for, not for hours of someone's training to pay off.
            patience = min(patience, job.mr)
        ready_at = job.queued_at + patience
        if walk.now < ready_at:
            # Look again when the patience is over (the search is the costly part).
            job.patient_until = ready_at
            s._set_timer(ready_at)
            return False, True
    evict_and_start(walk, job, choice)
    return True, False


def evict_and_start(walk: Walk, job: Job, choice: VictimChoice, why: str | None = None) -> None:
    """Evict ``choice.victims`` (each told why and what it loses, ``why`` or the policy's
    reason), then start ``job``."""
    s, view = walk.s, walk.view
    for victim in choice.victims:
        why_this = why if why is not None else view.why(job, victim)
        reason = (
            f"preempted by {job.id} ({job.project}): {why_this}; "
            f"loses {words.gpu_hours(walk._lost_of(victim))} of work"
        )
        s._stop(victim)
        victim.preempted += 1
        walk._by_use = None
        view.evicted(victim)
        if victim.project == job.project and victim.charged:
            # A swap: the team chose it, so the victim's GPUs still count towards the
            # team's claim to reclaim while ``job`` runs (``Workload.swapped_for``).
            victim.swapped_for = job.id
            view.swapped_out(victim)
        walk.evicted.append(victim)
        walk.result.preemptions.append(Preemption(victim.id, reason, job.id, "preempt"))
    names = ", ".join(v.id for v in choice.victims)
    walk._launch(
        job,
        choice.nodes,
        f"preempted {names} ({words.gpu_hours(choice.lost)} lost) to start on "
        + ", ".join(r.name for r in choice.nodes),
    )
