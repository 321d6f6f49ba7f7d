"""Why each pending workload has not started: the reasons and the order of one walk.

``explain`` fills ``CycleResult.reasons`` and ``order`` once the walk is done; the phrases
of a blocked workload (what it waits for, what it holds, when a victim becomes preemptible)
are built here from the walk's state. Each function takes the ``Walk`` of the cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.engine import holds, walk_reserve
from scheduler.engine import reasons as words
from scheduler.engine.records import Job

if TYPE_CHECKING:
    from scheduler.engine.walk import Walk


def blocked_phrase(walk: Walk, job: Job) -> str:
    """Why ``job``, blocked at its turn, did not start: what it waits for, what it holds,
    and when it may evict someone."""
    cap = walk.cap
    skip = walk.reserved
    parts = [
        words.waiting_for(
            job.gpus,
            job.nodes,
            cap.largest_free(skip),
            len(cap.whole_nodes(job.nodes, job.per_node, skip)),
        )
    ]
    held = sorted(walk.cap.nodes[i].name for i, w in walk.reserved.items() if w == job.id)
    if job.nodes > 1:
        parts.extend(gang_phrases(walk, job, held))
    elif held:
        until = " until they free" if len(held) > 1 else " until it frees"
        parts.append("holding " + ", ".join(held) + until + lending(walk, job))
    if job.patient_until > walk.now:
        parts.append(words.patience(job.patient_until - walk.now))
    elif job.lane == 0 and job.charged and walk.s.policy.preempts:
        parts.append(words.next_victim(next_victim_in(walk, job)))
    return "; ".join(parts)


def lending(walk: Walk, job: Job) -> str:
    """The words ``job``'s hold adds when the policy lends held GPUs (``holds``): to short
    work, and for a gang to work protected no longer than what it waits for."""
    if not walk.s.policy.lends_holds:
        return ""
    longest = walk.params.debug_min_runtime
    ready = walk.hold_ready.get(job.id)
    if ready == holds.NEVER:
        return (
            " (it waits for its own project's work on them to end; meanwhile work of any length "
            "may borrow the free GPUs and yields to it once past its minimum runtime)"
        )
    if ready is not None and ready - walk.now > longest:
        longest = ready - walk.now
    return (
        f" (meanwhile work protected for at most {words.duration(longest)} may borrow the "
        "free GPUs; it yields once past its minimum runtime)"
    )


def gang_phrases(walk: Walk, job: Job, held: list[str]) -> list[str]:
    """Why a gang has not started: what it holds, when it will hold whole nodes or why
    it cannot, and how many of the nodes it needs could be cleared for it now."""
    params, now = walk.params, walk.now
    if held:
        return [
            f"holding {', '.join(held)} ({len(held)} of the {job.nodes} nodes it needs) "
            "until they free" + lending(walk, job)
        ]
    if job.lane != 0:
        return []
    due = None if job.head_since is None else job.head_since + params.gang_reserve_after
    if due is not None and now < due:
        return [
            f"holds whole nodes in {words.duration(due - now)} (a gang first waits "
            f"{words.duration(params.gang_reserve_after)} at the head of its project's "
            "queue, since held nodes stand idle)"
        ]
    phrases = []
    budget, taken = walk.reserve_budget, len(walk.reserved)
    if job.nodes > budget:
        phrases.append(
            f"needs more nodes than may be held at once ({budget}, "
            f"{params.max_reserved_fraction * 100:.0f} % of healthy nodes)"
        )
    elif taken + job.nodes > budget:
        phrases.append(
            f"cannot hold its {job.nodes} nodes: {taken} of the {budget} nodes that may be "
            "held at once are held for work ranked ahead"
        )
    if due is None or not (job.charged and walk.s.policy.preempts):
        return phrases
    if walk.view.may_clear_for_gang(job):
        admissible, _ = walk_reserve.clear_options(walk, job)
        phrases.append(
            f"{admissible} of the {job.nodes} nodes it needs could be cleared for it now "
            "(empty, or running only work past its minimum runtime that may be preempted "
            "for it)"
        )
    elif not walk.view.is_guaranteed(job.project):
        phrases.append(
            "no nodes are cleared for it: its project already runs at least its entitlement"
        )
    elif swapped := walk.view.swapped_gpus(job.project):
        phrases.append(
            "no nodes are cleared for it: its project's work swapped out for its own "
            f"debug or higher-priority work ({swapped} GPUs) counts as held while that "
            "work runs"
        )
    return phrases


def next_victim_in(walk: Walk, job: Job) -> float | None:
    """Seconds until the first running workload this job could preempt is preemptible.

    Asked for every blocked head a cycle explains: the protected runs are looked at in
    the order their protection ends (one sort per start or stop, not a pass over every
    run per question), so the answer is usually among the first few."""
    view, run = walk.view, walk.s._run
    allowed: dict[tuple[str, int], bool] = {}
    for _, seq, wid in protected_by_end(walk):
        other = run.get(wid)
        if other is None or other.seq != seq or not other.charged or other.evictable:
            continue
        if other.project == job.project:
            if not view.own_victim_ok(job, other):
                continue
        else:
            key = (other.project, other.gpus)
            ok = allowed.get(key)
            if ok is None:
                ok = allowed[key] = view.may_preempt_project(job, other.project, other.gpus)
            if not ok:
                continue
        return other.protected_until - walk.now
    return None


def protected_by_end(walk: Walk) -> list[tuple[float, int, str]]:
    """The scheduler's protected runs (``Scheduler._protected``: when each protection
    ends, its start's sequence number, the workload), sorted; kept while no run started
    or stopped."""
    s = walk.s
    kept = walk._protected_order
    if kept is None or kept[0] != s._seq:
        kept = walk._protected_order = (s._seq, sorted(s._protected))
    return kept[1]


def shape_phrase(walk: Walk, job: Job) -> str:
    """What the cluster offers for this job's shape now (cached per shape)."""
    phrase = walk._shape_phrases.get(job.shape)
    if phrase is None:
        cap, skip = walk.cap, walk.reserved
        phrase = walk._shape_phrases[job.shape] = words.waiting_for(
            job.gpus,
            job.nodes,
            cap.largest_free(skip),
            len(cap.whole_nodes(job.nodes, job.per_node, skip)),
        )
    return phrase


def explain(walk: Walk, first: list[str], rest: list[str]) -> None:
    """Fill ``reasons`` and ``order`` for every workload still pending.

    ``first``: groups below their guarantee, ``rest`` the others, each in policy order.
    The order is the order of service: the guaranteed groups' work, then (with
    ``Policy.short_first``) the debug-class work of the rest, then the rest's other work,
    then the free lane.
    """
    s = walk.s
    short_first = s.policy.short_first
    guaranteed = set(first)
    served_first: list[str] = []  # guaranteed groups, then short work of the others
    served_next: list[str] = []  # the others' longer work
    free_lane: list[str] = []
    for lane in (0, 1):
        for group in first + rest:
            shapes = s._queues[lane].get(group)
            if not shapes:
                continue
            jobs = sorted(
                (j for heap in shapes.values() for _, seq, wid in heap
                 if (j := s._pending.get(wid)) is not None and j.seq == seq),
                key=lambda j: j.key,
            )  # fmt: skip
            explain_group(walk, jobs)
            if lane == 1:
                free_lane.extend(j.id for j in jobs)
            elif group in guaranteed:
                served_first.extend(j.id for j in jobs)
            else:
                for j in jobs:
                    short = short_first and walk._short(j)
                    (served_first if short else served_next).append(j.id)
    walk.result.order = served_first + served_next + free_lane


def explain_group(walk: Walk, jobs: list[Job]) -> None:
    """The reasons of one group's pending workloads, ``jobs`` in the group's key order."""
    view = walk.view
    phrase: dict[str, str] = {}
    for position, job in enumerate(jobs):
        if job.head_since is not None:
            walk.result.blocked_since[job.id] = job.head_since
        if job.patient_until > walk.now:
            walk.result.patient_until[job.id] = job.patient_until
        project = phrase.get(job.project)
        if project is None:
            project = phrase[job.project] = view.project_phrase(job.project)
            walk.result.project_phrases[job.project] = project
        if job.lane == 1:
            project += "; free lane (minimum runtime 0): runs on otherwise idle GPUs"
        rank = job.w.burst_rank
        if rank and walk._short(job):
            project += (
                f"; job {rank + 1} of its submitter's burst of debug work (the first of "
                "every burst, and a lone debug job, go before it)"
            )
        note = walk.notes.get(job.id)
        if note is None and position:
            # No count here: it would change for every workload behind one that started,
            # and the reason be rewritten each cycle; the position is shown beside it.
            note = "behind higher-ranked pending work in its queue; " + shape_phrase(walk, job)
        elif note is None:
            note = blocked_phrase(walk, job) + (
                "; the free GPUs are taken or reserved by higher-ranked work"
            )
        walk.result.reasons[job.id] = f"{project}; {note}"
