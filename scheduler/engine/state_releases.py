"""What time and node states take from running work: protections that end, drains.

Each cycle first releases the runs whose minimum runtime passed (they become preemptible)
and evicts from draining and down nodes what may go (``Scheduler.cycle``).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from scheduler.engine.model import CycleResult, NodeState, Preemption
from scheduler.engine.records import Job

if TYPE_CHECKING:
    from scheduler.engine.state_indexes import SchedulerIndexes


def release_deadlines(sched: SchedulerIndexes, now: float) -> list[Job] | None:
    """Charged work whose minimum runtime has passed becomes preemptible. Returns those
    workloads, or None when one is its project's first preemptible work (which changes
    which projects' turns a walk takes: see ``state_quiet.releases_matter``)."""
    heap = sched._protected
    released: list[Job] | None = []
    while heap and heap[0][0] <= now:
        _, seq, wid = heapq.heappop(heap)
        job = sched._run.get(wid)
        if job is None or job.seq != seq:
            continue
        if released is not None and job.project not in sched._evictable:
            released = None
        elif released is not None:
            released.append(job)
        job.evictable = True
        for name in job.placement:
            rec = sched.capacity.by_name[name]
            sched._log_opportunity(rec.idx, job)
            if job.nodes == 1:
                rec.hard -= 1
        sched._evictable.setdefault(job.project, {})[job.id] = job
        classes = sched._evictable_classes.setdefault(job.project, {})
        sched._worst_class.pop(job.project, None)
        cls = (-job.w.priority, job.mr)
        classes[cls] = classes.get(cls, 0) + 1
        sched._evictable_gpus[job.project] = sched._evictable_gpus.get(job.project, 0) + job.gpus
        sched._dirty = True
    return released


def drain(sched: SchedulerIndexes, now: float, result: CycleResult, requeue: list[Job]) -> None:
    """Evict from draining and down nodes what may go; report nodes that emptied."""
    for idx in sorted(sched._draining):
        rec = sched.capacity.nodes[idx]
        for wid in sorted(rec.running):
            job = sched._run[wid]
            down = rec.state == NodeState.DOWN
            due = job.start + job.mr <= now or not job.charged
            if not (down or rec.force or due):
                continue
            if down:
                why = f"node {rec.name} is down"
            elif rec.force:
                why = f"node {rec.name} is being drained now (forced by an operator)"
            else:
                why = (
                    f"node {rec.name} is draining for repair and the workload has passed "
                    f"its minimum runtime"
                )
            sched._stop(job)
            requeue.append(job)
            result.preemptions.append(Preemption(wid, why, None, "drain"))
        if not rec.running:
            sched._draining.discard(idx)
            if rec.state == NodeState.DRAINING:
                rec.state = NodeState.DRAINED
                rec.force = False
                sched.capacity.refresh(rec)
                sched.capacity.state_changed()
                result.drained.append(rec.name)
