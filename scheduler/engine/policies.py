"""Scheduling policies by name: only what differs between them lives here.

A policy decides (1) how pending work is grouped and ordered, (2) what may be preempted by
whom, and (3) caps on admission. Placement, gangs, backfill, reservations, drain and reasons
are shared mechanism in ``state.py``. Each policy returns a per-cycle *view* built from a
snapshot of the cluster (``CycleInputs``); the view is updated as the cycle starts and evicts
work so later decisions in the same cycle see earlier ones.

What every policy shares (the inputs, the view's defaults, ``Policy``) is in
``policy_base.py``; the fair-share policy, the largest, in ``policy_fairshare.py``; the
others and the names are here.
"""

from __future__ import annotations

from scheduler.engine.model import Workload
from scheduler.engine.policy_base import CycleInputs, Policy, PolicyView
from scheduler.engine.policy_fairshare import FairShare
from scheduler.engine.records import Job

__all__ = [
    "POLICIES",
    "CycleInputs",
    "FairShare",
    "Fifo",
    "Partition",
    "Policy",
    "PolicyView",
    "Quota",
    "make_policy",
]

POLICIES: tuple[str, ...] = ("fairshare", "quota", "partition", "fifo")


def _gpu_words(n: float) -> str:
    n = round(n, 1)
    n = int(n) if n == int(n) else n
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


class _QuotaView(PolicyView):
    def __init__(self, inputs: CycleInputs) -> None:
        super().__init__()
        self.deserved = inputs.tree.deserved_gpus(inputs.healthy_gpus)
        self.alloc = dict(inputs.charged_allocated)
        self.evictable = inputs.evictable
        self.groups = self._order(inputs.projects)
        self._borrowers = tuple(p for p in sorted(self.alloc) if self._borrowing(p))

    def _order(self, projects: list[str]) -> list[str]:
        deserved, alloc = self.deserved, self.alloc
        budgeted = sorted(
            (p for p in projects if deserved.get(p, 0.0) > 0),
            key=lambda p: (alloc.get(p, 0) / deserved[p], p),
        )
        unbudgeted = sorted(
            (p for p in projects if deserved.get(p, 0.0) <= 0), key=lambda p: (alloc.get(p, 0), p)
        )
        return budgeted + unbudgeted

    def project_phrase(self, project: str) -> str:
        deserved = self.deserved.get(project, 0.0)
        used = self.alloc.get(project, 0)
        if deserved <= 0:
            return f"project has no deserved quota (borrows idle GPUs only; uses {used})"
        state = "borrowing" if used > deserved else "within quota"
        return f"project {state} (uses {used} of {_gpu_words(deserved)} deserved)"

    def _borrowing(self, project: str) -> bool:
        return self.alloc.get(project, 0) > self.deserved.get(project, 0.0) + 1e-9

    def _within_after(self, job: Job) -> bool:
        own = self.alloc.get(job.project, 0) + job.gpus
        return own <= self.deserved.get(job.project, 0.0) + 1e-9

    def may_reclaim(self, job: Job) -> bool:
        # Reclaim: only a project that stays within its deserved quota after this start may
        # evict, and only from projects that borrow beyond theirs. Neither side can then
        # reclaim back, so two projects cannot ping-pong.
        return self._within_after(job)

    def group_may_reclaim(self, group: str) -> bool:
        return self.alloc.get(group, 0) < self.deserved.get(group, 0.0) and bool(self._borrowers)

    def may_preempt_project(self, job: Job, project: str, victim_gpus: int) -> bool:
        return project != job.project and self._borrowing(project)

    def signature(self, job: Job) -> object:
        return (self._within_after(job), self._borrowers)

    def own_victim_ok(self, job: Job, victim: Job) -> bool:
        return victim.w.priority < job.w.priority

    def victims_possible(self, group: str) -> bool:
        return any(gpus > 0 and self._borrowing(p) for p, gpus in self.evictable.items())

    def why(self, job: Job, victim: Job) -> str:
        if not victim.charged:
            return "free-lane work yields to charged work"
        if victim.project == job.project:
            return f"higher-priority work of the same project {job.project}"
        return (
            f"project {job.project} reclaims its deserved quota from {victim.project}, "
            f"which borrows beyond its own"
        )

    def started(self, job: Job) -> None:
        if job.charged:
            self.alloc[job.project] = self.alloc.get(job.project, 0) + job.gpus

    def evicted(self, job: Job) -> None:
        if job.charged:
            self.alloc[job.project] = self.alloc.get(job.project, 0) - job.gpus


class Quota(Policy):
    """KAI Scheduler / Kueue style: deserved GPUs now, idle quota lent, reclaimed by preemption."""

    name = "quota"
    preempts = True
    free_lane = True

    def begin(self, inputs: CycleInputs) -> PolicyView:
        return _QuotaView(inputs)


class _PartitionView(PolicyView):
    def __init__(self, inputs: CycleInputs) -> None:
        super().__init__()
        self.caps = inputs.tree.entitled_gpus(inputs.healthy_gpus)
        self.alloc = dict(inputs.allocated)
        caps, alloc = self.caps, self.alloc
        self.groups = sorted(
            inputs.projects,
            key=lambda p: (caps.get(p, 0) <= 0, alloc.get(p, 0) / max(caps.get(p, 0), 1), p),
        )

    def project_phrase(self, project: str) -> str:
        cap = self.caps.get(project, 0)
        if cap <= 0:
            return "project has no partition (no budget share)"
        return f"project partition of {_gpu_words(cap)} ({self.alloc.get(project, 0)} in use)"

    def cap_block(self, job: Job) -> str | None:
        cap = self.caps.get(job.project, 0)
        if job.gpus > cap:
            return f"asks for {_gpu_words(job.gpus)}, more than the partition's {cap}"
        used = self.alloc.get(job.project, 0)
        if used + job.gpus > cap:
            return f"partition full ({used} of {cap} GPUs in use)"
        return None

    def started(self, job: Job) -> None:
        self.alloc[job.project] = self.alloc.get(job.project, 0) + job.gpus

    def evicted(self, job: Job) -> None:
        self.alloc[job.project] = self.alloc.get(job.project, 0) - job.gpus


class Partition(Policy):
    """Static partitions: each project capped at its share of healthy GPUs, no borrowing."""

    name = "partition"

    def key(self, w: Workload, min_runtime: float) -> tuple:
        """Inside a partition: priority, then submit order."""
        return (-w.priority, w.submit_time, w.id)

    def begin(self, inputs: CycleInputs) -> PolicyView:
        return _PartitionView(inputs)


class _FifoView(PolicyView):
    """One queue in submit order (the view's default single group)."""

    def project_phrase(self, project: str) -> str:
        return "one queue in submit order"


class Fifo(Policy):
    """One queue by submit time, no preemption (what 'everything is HIGH priority' becomes)."""

    name = "fifo"

    def group(self, w: Workload) -> str:
        """Everyone waits in the same queue."""
        return ""

    def key(self, w: Workload, min_runtime: float) -> tuple:
        """Submit order, then id."""
        return (w.submit_time, w.id)

    def begin(self, inputs: CycleInputs) -> PolicyView:
        return _FifoView()


_BY_NAME: dict[str, type[Policy]] = {
    "fairshare": FairShare,
    "quota": Quota,
    "partition": Partition,
    "fifo": Fifo,
}


def make_policy(name: str) -> Policy:
    """Return the policy called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return _BY_NAME[name]()
    except KeyError:
        raise ValueError(
            f"unknown policy {name!r}; known policies: {', '.join(POLICIES)}"
        ) from None
