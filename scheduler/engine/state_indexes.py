"""What the scheduler keeps of its workloads and nodes, and how a start or a stop updates it.

``SchedulerIndexes`` is the base of ``Scheduler`` (``state.py``): the pending queues (per
lane and group, then per shape, in the policy's order), the running work and its
preemptible part per project, the loans of held nodes, the opportunity log a failed search
reads, the timers. The walk (``walk.py``) reads and updates them directly: one mechanism
split in files for size.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from scheduler.engine.fairtree import BudgetTree
from scheduler.engine.model import BudgetNode, Node, PolicyParams, RunningWorkload, Workload
from scheduler.engine.names import interned
from scheduler.engine.placement import Capacity, NodeRec
from scheduler.engine.policies import Policy, make_policy
from scheduler.engine.records import Job, protection_seconds

# (gpus, nodes); variable-length in the annotation so the native build keeps it a Python
# tuple (a dict key), not a C struct boxed anew at every lookup
_Shape = tuple[int, ...]
QueueEntry = tuple[tuple, int, str]  # (order key, sequence number, workload id) in a shape heap
# One per lane (0: charged, 1: the free lane): group -> shape -> heap. Keyed by the group's
# (interned) name, not by a (lane, group) tuple: a tuple key is hashed and compared element by
# element at every lookup, and the walk looks groups up many times a cycle.
LaneQueues = dict[str, dict[_Shape, list[QueueEntry]]]


class SchedulerIndexes:
    """The scheduler's state: its nodes, budget, policy and parameters, and every index
    over its pending and running work (see ``Scheduler`` for the arguments)."""

    # size: every index declared in one place with why; mypyc then knows each is always set
    def __init__(
        self,
        nodes: Iterable[Node],
        budget_root: BudgetNode | None,
        policy: Policy | str | None = None,
        params: PolicyParams | None = None,
        *,
        incremental: bool = True,
    ) -> None:
        if policy is None or isinstance(policy, str):
            policy = make_policy(policy or "fairshare")
        self.policy: Policy = policy
        self.params = params or PolicyParams()
        self.incremental = incremental
        self.capacity = Capacity(nodes)
        self._budget_root = budget_root
        self.tree = BudgetTree(budget_root)
        #: id -> RunningWorkload for every running workload (read-only for drivers)
        self.running: dict[str, RunningWorkload] = {}
        self._pending: dict[str, Job] = {}
        # GPUs the pending workloads ask for, and how many pending single-node workloads ask
        # for each number of GPUs (``idle_gpus`` reads them without a pass over the queue).
        self._pending_gpus = 0
        self._pending_sizes: dict[int, int] = {}
        self._run: dict[str, Job] = {}
        self._queues: list[LaneQueues] = [{}, {}]  # per lane, see ``LaneQueues``
        self._work_per_project: dict[str, int] = {}
        self._projects: list[str] | None = None  # its keys sorted, until one comes or goes
        self._alloc: dict[str, int] = {}
        self._charged_alloc: dict[str, int] = {}
        self._debug_alloc: dict[str, int] = {}  # charged running debug-class GPUs
        # charged running work inside its minimum runtime: (deadline, seq, id)
        self._protected: list[tuple[float, int, str]] = []
        # charged running work past its minimum runtime, per project
        self._evictable: dict[str, dict[str, Job]] = {}
        self._evictable_gpus: dict[str, int] = {}
        # per project: how many evictable workloads of each class (-priority, min runtime),
        # so the lowest class a project could evict of its own costs a look at a few keys
        self._evictable_classes: dict[str, dict[tuple[int, float], int]] = {}
        # per project: the lowest of those classes, until they change
        # (see walk_victims.own_worst)
        self._worst_class: dict[str, tuple[int, float]] = {}
        # per project: how many pending charged workloads of each class, so a cycle learns at
        # a glance whether any could evict a run of its own project
        # (``state_quiet.releases_matter``)
        self._pending_classes: dict[str, dict[tuple[int, float], int]] = {}
        # per group: how many pending charged debug-class workloads (the walk's short pass
        # skips a group without any)
        self._pending_short: dict[str, int] = {}
        self._free_running: dict[str, Job] = {}
        # Pending workloads swapped out by a workload of their own project (``swapped_for``),
        # by id: their GPUs count towards their team's claim while the swapper runs
        # (``swapped_gpus``). Entries whose swap is over are dropped there.
        self._swapped: dict[str, Job] = {}
        # Workloads whose run is stopping after a swap, the driver waiting for the stop to
        # be confirmed (``add_stopping``): neither pending nor running, they count the same.
        self._stopping: dict[str, Job] = {}
        # Loans (``holds``): holder id -> node position -> GPUs its borrowers hold there.
        self._loans: dict[str, dict[int, int]] = {}
        self._draining: set[int] = set()
        # Node positions whose free GPUs or preemptible work grew, in order: a failed
        # preemption search only needs to look again at nodes logged after it failed.
        self._opp_log: list[int] = []
        # Beside each entry: the id of the running workload whose passing its minimum runtime
        # made the entry (it became preemptible there; nothing else on the node changed), or
        # None for any other change. A failed search skips the first kind when that workload
        # is no victim of its own (walk_victims.fresh_nodes). An id, not the workload: the
        # log lives as long as the scheduler, and would otherwise keep every such workload
        # alive.
        self._opp_why: list[str | None] = []
        self._last_reserved: dict[int, str] = {}
        # Healthy nodes emptiest first, as (used, busy until, position), and each node's
        # entry: kept by holds.nodes_by_use
        self._by_use: list[tuple] | None = None
        self._by_use_of: dict[int, tuple] = {}
        self._seq = 0
        self._walks = 0  # walks made so far: each numbers itself (``Walk.serial``)
        self._dirty = True
        self._last_order: tuple[list[str], list[str]] | None = None
        self._last_usage_order: list[str] | None = None
        self._next_timer = float("inf")
        # Every timer the last walk set, as (when, the workload whose failed search's memo
        # runs out then, or None for any other timer): see ``state_quiet.rechecks_fail``.
        self._timers: list[tuple[float, Job | None]] = []
        self._last_cycle = float("-inf")
        # How many running workloads are idle (``set_idle``): while none is, victim pools
        # keep their plain order without a key function.
        self._idle_runs = 0

    def _make_job(self, w: Workload) -> Job:
        if w.gpus < 1:
            raise ValueError(f"workload {w.id!r}: gpus must be at least 1")
        if w.nodes < 1:
            raise ValueError(f"workload {w.id!r}: nodes must be at least 1")
        if w.min_runtime < 0:
            raise ValueError(f"workload {w.id!r}: min_runtime must not be negative")
        cap = self.capacity
        nodes = w.nodes
        if nodes == 1 and w.gpus > cap.max_gpus > 0:
            # Bigger than any node: it is a gang of the fewest whole nodes that hold it.
            nodes = -(-w.gpus // cap.max_gpus)
        if w.gpus < nodes:
            raise ValueError(f"workload {w.id!r}: a gang needs at least one GPU per node")
        if nodes > len(cap.nodes) or -(-w.gpus // nodes) > cap.max_gpus:
            raise ValueError(
                f"workload {w.id!r}: asks for {w.gpus} GPUs on {nodes} nodes, more than the "
                f"cluster has ({len(cap.nodes)} nodes of at most {cap.max_gpus} GPUs)"
            )
        job = Job(w, nodes, min(w.min_runtime, self.params.max_min_runtime))
        job.key = self.policy.key(w, job.mr)
        job.group = interned(self.policy.group(w))  # as ``Job.project``
        job.lane = 1 if self.policy.free_lane and not job.charged else 0
        return job

    def _enqueue(self, job: Job) -> None:
        self._seq += 1
        job.seq = self._seq
        job.fail_pos = -1
        job.clear_pos = -1
        self._pending[job.id] = job
        if job.swapped_for is not None:
            self._swapped[job.id] = job
        self._count_pending(job, +1)
        shapes = self._queues[job.lane].setdefault(job.group, {})
        heapq.heappush(shapes.setdefault(job.shape, []), (job.key, job.seq, job.id))
        self._dirty = True

    def _count_pending(self, job: Job, sign: int) -> None:
        self._pending_gpus += sign * job.gpus
        if job.charged:
            if job.mr <= self.params.debug_min_runtime:
                short = self._pending_short.get(job.group, 0) + sign
                if short:
                    self._pending_short[job.group] = short
                else:
                    del self._pending_short[job.group]
            classes = self._pending_classes.setdefault(job.project, {})
            cls = (-job.w.priority, job.mr)
            count = classes.get(cls, 0) + sign
            if count:
                classes[cls] = count
            else:
                del classes[cls]
                if not classes:
                    del self._pending_classes[job.project]
        if job.nodes == 1:
            count = self._pending_sizes.get(job.gpus, 0) + sign
            if count:
                self._pending_sizes[job.gpus] = count
            else:
                del self._pending_sizes[job.gpus]

    def _touch_project(self, project: str, delta: int) -> None:
        count = self._work_per_project.get(project, 0) + delta
        if count > 0:
            if project not in self._work_per_project:
                self._projects = None
            self._work_per_project[project] = count
        elif self._work_per_project.pop(project, None) is not None:
            self._projects = None

    def _head(self, heap: list[QueueEntry]) -> Job | None:
        """The live head of a shape heap, dropping stale entries (cancelled, started)."""
        pending = self._pending
        while heap:
            _, seq, wid = heap[0]
            job = pending.get(wid)
            if job is not None and job.seq == seq:
                return job
            heapq.heappop(heap)
        return None

    def _start(self, job: Job, recs: list[NodeRec], amounts: list[int], now: float) -> None:
        gang = len(recs) > 1 or job.nodes > 1
        for rec, gpus in zip(recs, amounts, strict=True):
            self.capacity.allocate(rec, job.id, gpus, exclusive=gang)
        if self._pending.pop(job.id, None) is not None:
            self._count_pending(job, -1)
        job.swapped_for = None  # running again: the swap is over
        self._seq += 1
        job.seq = self._seq
        job.running = True
        job.start = now
        job.placement = {rec.name: gpus for rec, gpus in zip(recs, amounts, strict=True)}
        job.evictable = False
        job.protected_until = now + self.protection(job)
        if job.charged or job.nodes > 1:
            for rec in recs:
                rec.hard += 1
        self._run[job.id] = job
        if job.loan_for is not None:
            lent = self._loans.setdefault(job.loan_for, {})
            for rec, gpus in zip(recs, amounts, strict=True):
                lent[rec.idx] = lent.get(rec.idx, 0) + gpus
        self.running[job.id] = RunningWorkload(
            job.w, dict(job.placement), now, job.protected_until, job.loan_for
        )
        self._alloc[job.project] = self._alloc.get(job.project, 0) + job.gpus
        if job.charged:
            self._charged_alloc[job.project] = self._charged_alloc.get(job.project, 0) + job.gpus
            if job.mr <= self.params.debug_min_runtime:
                self._debug_alloc[job.project] = self._debug_alloc.get(job.project, 0) + job.gpus
            heapq.heappush(self._protected, (job.protected_until, job.seq, job.id))
        elif self.policy.free_lane:
            self._free_running[job.id] = job
            for rec in recs:
                self._log_opportunity(rec.idx)
        self._dirty = True

    def _stop(self, job: Job) -> None:
        """Take a running job off its nodes and out of every running index."""
        hard = (job.charged and not job.evictable) or job.nodes > 1
        for name in job.placement:
            rec = self.capacity.by_name[name]
            self.capacity.release(rec, job.id)
            if hard:
                rec.hard -= 1
            self._log_opportunity(rec.idx)
        del self._run[job.id]
        del self.running[job.id]
        if job.idle:
            job.idle = False  # its next run starts busy
            self._idle_runs -= 1
        if job.loan_for is not None:
            self._end_loan(job)
        self._alloc[job.project] -= job.gpus
        if job.charged:
            self._charged_alloc[job.project] -= job.gpus
            if job.mr <= self.params.debug_min_runtime:
                self._debug_alloc[job.project] -= job.gpus
        if job.evictable:
            bucket = self._evictable[job.project]
            del bucket[job.id]
            self._evictable_gpus[job.project] -= job.gpus
            classes = self._evictable_classes[job.project]
            self._worst_class.pop(job.project, None)
            cls = (-job.w.priority, job.mr)
            classes[cls] -= 1
            if not classes[cls]:
                del classes[cls]
            if not bucket:
                del self._evictable[job.project]
                del self._evictable_gpus[job.project]
                del self._evictable_classes[job.project]
        self._free_running.pop(job.id, None)
        job.running = False
        job.evictable = False
        job.placement = {}
        self._seq += 1
        job.seq = self._seq  # its deadline entry is now stale
        self._dirty = True

    def swapped_gpus(self) -> dict[str, int]:
        """Per project, GPUs of its pending (or stopping, ``add_stopping``) work swapped out
        by its own work that still runs (``Workload.swapped_for``); swaps that are over (the
        swapper stopped, the swapped workload started again or left) are forgotten here."""
        held: dict[str, int] = {}
        for wid, job in list(self._swapped.items()):
            if self._pending.get(wid) is not job:
                del self._swapped[wid]  # started again (which ends the swap) or gone
                continue
            if not self._swap_holds(job):
                job.swapped_for = None  # the swapper stopped: the swap is over
                del self._swapped[wid]
                continue
            held[job.project] = held.get(job.project, 0) + job.gpus
        for job in self._stopping.values():
            if self._swap_holds(job):
                held[job.project] = held.get(job.project, 0) + job.gpus
        return held

    def _swap_holds(self, job: Job) -> bool:
        """Is ``job`` (charged work) swapped out by a workload of its own project that still
        runs?"""
        swapper = self._run.get(job.swapped_for or "")
        return swapper is not None and swapper.project == job.project and job.charged

    def protection(self, job: Job) -> float:
        """How long a run of ``job`` starting now would be protected (churn budget included
        when the policy has one)."""
        if self.policy.churn_budget:
            return protection_seconds(job, self.params.max_min_runtime)
        return job.mr

    def _end_loan(self, job: Job) -> None:
        """Forget the loan of a run that stops."""
        holder = job.loan_for
        assert holder is not None
        lent = self._loans[holder]
        for name, gpus in job.placement.items():
            idx = self.capacity.by_name[name].idx
            left = lent[idx] - gpus
            if left:
                lent[idx] = left
            else:
                del lent[idx]
        if not lent:
            del self._loans[holder]
        job.loan_for = None

    def _log_opportunity(self, idx: int, passed: Job | None = None) -> None:
        """Log that node ``idx`` may serve work it could not before: its free GPUs or
        preemptible work grew (``passed``: only because that workload there passed its
        minimum runtime)."""
        self._opp_log.append(idx)
        self._opp_why.append(None if passed is None else passed.id)

    def next_timer(self) -> float:
        """When the engine next wants a cycle though nothing else changes (a patience or a
        wait reaching its bound, a failed search's memo running out; infinity: never). The
        live loop's cycles every few seconds honour it. A replay wakes at
        ``next_wait_timer`` instead, which both paths of the engine keep alike."""
        return self._next_timer

    def next_wait_timer(self, after: float) -> float:
        """The first timer later than ``after`` that ends a wait (a patience or a wait
        reaching its hold bound; infinity: none). Unlike ``next_timer`` it leaves out failed
        searches' memos running out: a run forward in which nothing arrives (the queue page's
        estimate) searches again at its next finish or minimum-runtime end, when the state
        the search failed on has changed, and waking at each memo would spend its step bound
        on searches that fail again. And when a memo runs out depends on which path made it:
        the reference (``incremental=False``) repeats some searches that the incremental
        path skips, and renews their memos then; the waits are the same on both paths."""
        return min((at for at, search in self._timers if search is None and at > after),
                   default=float("inf"))  # fmt: skip

    def _set_timer(self, at: float, search: Job | None = None) -> None:
        """Make the first cycle at or after ``at`` walk (``search``: the workload whose failed
        search's memo runs out then)."""
        if at < self._next_timer:
            self._next_timer = at
        self._timers.append((at, search))
