"""When a cycle may skip its walk: the last walk's decisions would all be taken again.

Most cycles of a busy cluster change nothing: only time passed, or runs passed their
minimum runtime that no pending workload can use, or the memo of a failed search ran out
and the search fails again. ``is_quiet`` tells those apart from cycles that must walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.engine import walk_victims
from scheduler.engine.model import CycleResult
from scheduler.engine.policies import PolicyView
from scheduler.engine.records import Job
from scheduler.engine.walk import Walk

if TYPE_CHECKING:
    from scheduler.engine.state import Scheduler


def is_quiet(
    sched: Scheduler,
    view: PolicyView,
    now: float,
    first: list[str],
    order: list[str],
    requeued: bool,
    released: list[Job] | None,
    dirty_before: bool,
    explain: bool,
) -> bool:
    """Would a walk now decide what the last one did? Then the cycle skips it.

    Quiet: nothing was requeued, the group order (``first``: the groups served first up
    to their guarantee, then ``order``) is the last walk's, and whatever made the
    scheduler dirty or woke it cannot change a decision. However long ago the last walk
    was: what time alone changes is a failed search's memo running out, and each such
    search has a timer that wakes the cycle (``rechecks_fail``). ``released``: the runs
    that just passed their minimum runtime (as
    ``state_releases.release_deadlines`` returns them); ``dirty_before``: whether the
    scheduler was dirty before they were released.
    """
    quiet = sched.incremental and not requeued and (first, order) == sched._last_order
    if quiet and sched._dirty:
        # Dirty only because runs passed their minimum runtime since a walk that decided
        # nothing: quiet still when no pending workload can use any of them.
        quiet = not dirty_before and bool(released) and not explain
        if quiet and released is not None:
            quiet = not releases_matter(sched, released, view, first)
    if quiet and now >= sched._next_timer:
        # Woken by timers: quiet still when each is a failed search's memo running out
        # and that search fails again.
        quiet = not explain and rechecks_fail(sched, view, now)
    return quiet


def starts_settled(sched: Scheduler, walk: Walk, first: list[str]) -> bool:
    """Did a walk that started work and evicted nothing leave nothing for the next walk
    to redo (so the scheduler may stay clean)? ``first``: the groups the walk served first
    up to their guarantee.

    Yes when every head that failed (or group passed over) did so after the walk's last
    start, and the policy's view followed each start (``PolicyView.follows_starts``): each
    failure then saw the state the walk leaves, and the next walk would fail it again
    (memos, holds and timers as this one left them). And the starts must leave the order in
    which the guarantee serves teams as it was: a start moves its team towards its
    entitlement, and the next walk may then serve another team first.
    """
    view = walk.view
    if not view.follows_starts or walk.started_after_failure:
        return False
    charged = sched._queues[0]
    after = [g for g in view.guarantee_order(view.groups) if g in charged]
    return after == [g for g in first if g in charged]


def rechecks_fail(sched: Scheduler, view: PolicyView, now: float) -> bool:
    """Is every timer due a failed search whose memo ran out, and does each fail again?

    Asked only when nothing else would make this cycle walk: the walk would then take
    the last one's turns and holds again, and could differ only where a search whose
    memo ran out now finds a victim set. So only those searches are made
    (``walk_victims.recheck``); when all fail, their memos are renewed, and the timers and the
    time of the last walk become what the walk would have left.
    """
    recheck = sched.params.preemption_recheck
    due: list[Job] = []
    for at, job in sched._timers:
        if at > now:
            continue
        if (
            job is None
            or sched._pending.get(job.id) is not job
            or job.fail_pos < 0
            or job.fail_time + recheck > now
            or job.patient_until > now
        ):
            return False
        if job not in due:
            due.append(job)
    if not walk_victims.recheck(Walk(sched, view, now, CycleResult(), False), due):
        return False
    timers = [(at, job) for at, job in sched._timers if at > now]
    timers.extend((now + recheck, job) for job in due)
    sched._timers = timers
    sched._next_timer = min((at for at, _ in timers), default=float("inf"))
    sched._last_cycle = now
    return True


def releases_matter(
    sched: Scheduler, released: list[Job], view: PolicyView, claimants: list[str]
) -> bool:
    """Could a walk use any of ``released`` (runs that just passed their minimum runtime)?

    Asked only when nothing else changed since a walk that decided nothing: that walk's
    turns, holds and failed searches would all be taken again, and only a run that some
    pending workload may now evict or move could make this walk differ. Permissive (it
    may say yes too often, never no wrongly). A run matters when:
    - it borrows GPUs of a node held for a workload still pending (which may recall it);
    - another team may reclaim that many GPUs from its project
      (``PolicyView.may_lose_to_reclaim``; ``claimants``: the groups with pending work
      the policy offers capacity first, ``guaranteed``);
    - its own project has pending work of a better class (which may evict it);
    - the policy moves work to empty a node, another node has room for the run, and a
      pending single-node workload would fit on the run's node once it left.
    Only for a policy whose failed-search memo skips such runs by itself
    (``PolicyView.victims_follow_signature``): the next walk that does run then searches
    again exactly what this one would have.
    """
    if not view.victims_follow_signature:
        return True
    for job in released:
        if job.loan_for is not None and job.loan_for in sched._pending:
            return True
        if view.may_lose_to_reclaim(job.project, job.gpus, claimants):
            return True
        classes = sched._pending_classes.get(job.project)
        if classes and min(classes) < (-job.w.priority, job.mr):
            return True
        if sched.policy.consolidates and job.nodes == 1 and may_move(sched, job):
            return True
    return False


def may_move(sched: Scheduler, job: Job) -> bool:
    """Could ``holds.move_for`` move running single-node ``job`` for a pending workload:
    another node has room for it, and some pending single-node workload needs more than
    the free GPUs of ``job``'s node but no more than those plus ``job``'s?"""
    cap = sched.capacity
    rec = cap.by_name[next(iter(job.placement))]
    elsewhere = False
    for free in range(cap.max_gpus, job.gpus - 1, -1):
        if any(idx != rec.idx for idx in cap.buckets[free]):
            elsewhere = True
            break
    if not elsewhere:
        return False
    most = min(rec.gpus, rec.free + job.gpus)
    return any(rec.free < gpus <= most for gpus in sched._pending_sizes)
