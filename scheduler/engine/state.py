"""The stateful scheduler: cluster state + a policy; ``cycle`` turns them into orders.

The shared mechanism lives here: pending queues, admission walk, placement, backfill with
reservations, preemption plumbing, drain and reasons. Policies (``policies.py``) only say how
work is ordered, what may be preempted, and what is capped.

Cost model. Pending work is kept per (lane, group) and, inside a group, per *shape*
(GPUs, nodes) in a heap ordered by the policy's key. A cycle walks groups in policy order
and looks only at the head of each shape: when the head of a shape cannot start (not even
by preempting), no later workload of the same shape in that group can, so the rest of the
shape is skipped. The walk stops as soon as no GPU is free and no victim can exist for the
groups still to come. Running workloads become preemptible through a heap of
minimum-runtime deadlines, so nothing is rescanned to find them. A cycle where nothing
changed since the last one (no submit, finish, cancel, node change, start, deadline or
reservation timer, same project order) returns at once.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterable, Mapping

from scheduler.engine import walk_reasons, walk_victims
from scheduler.engine.fairtree import BudgetTree
from scheduler.engine.model import (
    BudgetNode,
    CycleResult,
    IdleGpus,
    Node,
    NodeState,
    PolicyParams,
    Preemption,
    RunningWorkload,
    Workload,
)
from scheduler.engine.placement import Capacity, NodeRec
from scheduler.engine.policies import CycleInputs, Policy, PolicyView, make_policy
from scheduler.engine.records import Job, protection_seconds
from scheduler.engine.walk import Walk

_QueueKey = tuple[int, str]  # (lane, group)
# (gpus, nodes); variable-length in the annotation so the native build keeps it a Python
# tuple (a dict key), not a C struct boxed anew at every lookup
_Shape = tuple[int, ...]
QueueEntry = tuple[tuple, int, str]  # (order key, sequence number, workload id) in a shape heap


class Scheduler:
    """Cluster state plus a policy; ``cycle(now, usage)`` decides and applies orders.

    ``nodes``: the cluster's nodes. ``budget_root``: the budget tree (None: no budgets).
    ``policy``: a ``Policy`` or a policy name (default ``fairshare``). All methods are
    deterministic: the same calls in the same order give the same orders.

    ``incremental=False`` turns off every shortcut that only saves work — skipping a cycle
    in which nothing changed, a gang's memo of failed clearings, orders and per-node values
    kept between cycles — and recomputes them each cycle: the reference the shortcuts are
    tested against (they must give the same orders), far slower on a large cluster.
    """

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
        self._queues: dict[_QueueKey, dict[_Shape, list[QueueEntry]]] = {}
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
        # per project: the lowest of those classes, until they change (see walk_victims.own_worst)
        self._worst_class: dict[str, tuple[int, float]] = {}
        # per project: how many pending charged workloads of each class, so a cycle learns
        # at a glance whether any could evict a run of its own project (``_releases_matter``)
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
        # is no victim of its own (walk_victims.fresh_nodes). An id, not the workload: the log lives
        # as long as the scheduler, and would otherwise keep every such workload alive.
        self._opp_why: list[str | None] = []
        self._last_reserved: dict[int, str] = {}
        # Healthy nodes emptiest first, as (used, busy until, position), and each node's
        # entry: kept by holds.nodes_by_use
        self._by_use: list[tuple] | None = None
        self._by_use_of: dict[int, tuple] = {}
        self._seq = 0
        self._dirty = True
        self._last_order: tuple[list[str], list[str]] | None = None
        self._last_usage_order: list[str] | None = None
        self._next_timer = float("inf")
        # Every timer the last walk set, as (when, the workload whose failed search's memo
        # runs out then, or None for any other timer): see ``_rechecks_fail``.
        self._timers: list[tuple[float, Job | None]] = []
        self._last_cycle = float("-inf")
        # How many running workloads are idle (``set_idle``): while none is, victim pools
        # keep their plain order without a key function.
        self._idle_runs = 0

    # ------------------------------------------------------------------ driver calls

    def submit(self, workload: Workload) -> None:
        """Add a new (or requeued) pending workload; ``ValueError`` if it can never run."""
        if workload.id in self._pending or workload.id in self._run:
            raise ValueError(f"workload {workload.id!r} is already known to the scheduler")
        job = self._make_job(workload)
        known = job.project in self._work_per_project
        was_dirty = self._dirty
        self._enqueue(job)
        self._touch_project(job.project, +1)
        if known and self.incremental and not was_dirty:
            # Behind the head of its shape in a project that already had work, a new
            # workload changes nothing a walk looks at: the walk sees only shape heads.
            heap = self._queues[(job.lane, job.group)][job.shape]
            if self._head(heap) is not job:
                self._dirty = False

    def add_running(
        self,
        workload: Workload,
        placement: dict[str, int],
        start_time: float,
        *,
        loan_for: str | None = None,
        idle: bool = False,
    ) -> None:
        """Record a workload that is already running (the live loop rebuilding its state).

        ``loan_for``: the run borrows a node held for that workload (``Start.loan_for``).
        ``idle``: the run is idle (``set_idle``).
        """
        if workload.id in self._pending or workload.id in self._run:
            raise ValueError(f"workload {workload.id!r} is already known to the scheduler")
        job = self._make_job(workload)
        recs = []
        for name in sorted(placement):
            if name not in self.capacity.by_name:
                raise ValueError(f"workload {workload.id!r}: unknown node {name!r}")
            recs.append(self.capacity.by_name[name])
        if sum(placement.values()) != workload.gpus:
            raise ValueError(f"workload {workload.id!r}: placement does not add up to its GPUs")
        self._touch_project(job.project, +1)
        job.loan_for = loan_for
        self._start(job, recs, [placement[r.name] for r in recs], start_time)
        if idle:
            self.set_idle(workload.id, True)

    def set_idle(self, workload_id: str, idle: bool) -> None:
        """Mark a running workload idle or busy again (the driver judges it from telemetry:
        GPUs below 5 % busy for 30 minutes while past its minimum runtime).

        Among the victims the policy allows, idle runs are taken before busy ones; the flag
        makes no run a victim that was not one. A run starts busy: a preempted idle run that
        restarts is idle again only when the driver says so anew.
        """
        job = self._run.get(workload_id)
        if job is None:
            raise KeyError(f"workload {workload_id!r} is not running")
        if job.idle == idle:
            return
        job.idle = idle
        self._idle_runs += 1 if idle else -1
        self.running[workload_id] = dataclasses.replace(self.running[workload_id], idle=idle)
        # Which victim set is cheapest may change: the next cycle walks. (No failed search
        # can succeed by it, so the memos stay: the flag orders victims, never allows one.)
        self._dirty = True

    def add_stopping(self, workload: Workload) -> None:
        """Record a workload whose run was ordered to stop and has not stopped yet (the live
        loop rebuilding its state while the executor stops it). It takes no GPUs and is not
        started; when it was swapped out by running work of its own project
        (``Workload.swapped_for``), its GPUs count towards its team's claim as a pending
        swapped-out workload's do (``swapped_gpus``)."""
        if workload.id in self._pending or workload.id in self._run:
            raise ValueError(f"workload {workload.id!r} is already known to the scheduler")
        job = self._make_job(workload)
        if job.swapped_for is not None:
            self._stopping[job.id] = job
            self._dirty = True

    def finish(self, workload_id: str) -> None:
        """A running workload ended by itself: free its GPUs."""
        job = self._run.get(workload_id)
        if job is None:
            raise KeyError(f"workload {workload_id!r} is not running")
        self._stop(job)
        self._touch_project(job.project, -1)

    def cancel(self, workload_id: str) -> None:
        """Remove a pending or running workload."""
        if workload_id in self._run:
            self.finish(workload_id)
            return
        job = self._pending.pop(workload_id, None)
        if job is None:
            raise KeyError(f"workload {workload_id!r} is neither pending nor running")
        self._count_pending(job, -1)
        job.seq = -1  # its heap entry is now stale
        self._touch_project(job.project, -1)
        self._dirty = True

    def forget(self, workload_id: str) -> None:
        """Drop whatever the scheduler holds of a workload — pending, running or stopping
        (``add_stopping``) — so a driver can record it again as its records now have it (the
        live loop does, for each workload that changed since its last cycle). An unknown id
        is not an error."""
        if workload_id in self._run or workload_id in self._pending:
            self.cancel(workload_id)
        if self._stopping.pop(workload_id, None) is not None:
            self._dirty = True

    def set_node_state(self, node_name: str, state: NodeState, *, force: bool = False) -> None:
        """Mark a node healthy, draining, drained or down.

        Draining: nothing new lands; each workload is evicted once past its minimum runtime
        (``force=True``: at the next cycle, regardless). Down: its workloads are requeued at
        the next cycle. Drained may only be set on an empty node.
        """
        rec = self.capacity.by_name.get(node_name)
        if rec is None:
            raise KeyError(f"unknown node {node_name!r}")
        state = NodeState(state)
        if state == NodeState.DRAINED and rec.running:
            raise ValueError(f"node {node_name!r} still runs workloads; drain it first")
        rec.state = state
        rec.force = force and state == NodeState.DRAINING
        if state in (NodeState.DRAINING, NodeState.DOWN):
            self._draining.add(rec.idx)
        else:
            self._draining.discard(rec.idx)
        self.capacity.refresh(rec)
        self.capacity.state_changed()
        self._log_opportunity(rec.idx)
        self._dirty = True

    def set_budget(self, budget_root: BudgetNode | None) -> None:
        """Replace the budget tree (an allocation change was applied)."""
        self._budget_root = budget_root
        self.tree = BudgetTree(budget_root)
        for job in self._pending.values():
            job.fail_pos = -1  # victim eligibility may have changed for everyone
            job.clear_pos = -1
        self._dirty = True

    def rebuilt(self) -> Scheduler:
        """A new scheduler holding what this one holds, as a driver that rebuilds the engine
        from its records passes it (the live loop does, after a restart or on any doubt).

        It gets the nodes and their states, the budget, a fresh policy of the same kind and
        the same parameters, the running work where it runs and the pending work in its
        order, each with what the engine remembered of it (preemptions suffered, when it was
        last queued, since when it waits blocked). Nothing memoised is carried: memos only
        save time, so the next cycles decide what this scheduler's would.
        """
        fresh = Scheduler(
            [Node(rec.name, rec.gpus) for rec in self.capacity.nodes],
            self._budget_root,
            policy=type(self.policy)(),
            params=self.params,
            incremental=self.incremental,
        )
        for job in self._run.values():
            fresh.add_running(
                _as_remembered(job),
                dict(job.placement),
                job.start,
                loan_for=job.loan_for,
                idle=job.idle,
            )
        for rec in self.capacity.nodes:
            if rec.state != NodeState.HEALTHY:
                fresh.set_node_state(rec.name, rec.state, force=rec.force)
        for job in self._pending.values():
            fresh.submit(_as_remembered(job))
        for job in self._stopping.values():
            fresh.add_stopping(_as_remembered(job))
        return fresh

    # ------------------------------------------------------------------ introspection

    def pending_count(self) -> int:
        """How many workloads are pending."""
        return len(self._pending)

    def pending_ids(self) -> list[str]:
        """Ids of pending workloads, sorted."""
        return sorted(self._pending)

    def free_gpus(self) -> int:
        """GPUs free for new work (healthy nodes not owned by a gang)."""
        return self.capacity.free_total

    def allocated_gpus(self) -> int:
        """GPUs held by running workloads."""
        return sum(self._alloc.values())

    def idle_gpus(self) -> IdleGpus:
        """Free GPUs on healthy nodes after the last cycle, by why they are idle (see
        ``IdleGpus``). One pass over the nodes."""
        smallest = min(self._pending_sizes, default=0)
        held = gang_owned = fragmented = unused = 0
        for rec in self.capacity.nodes:
            if rec.state != NodeState.HEALTHY or rec.free <= 0:
                continue
            if rec.idx in self._last_reserved:
                held += rec.free
            elif rec.exclusive is not None:
                gang_owned += rec.free
            elif smallest and rec.free >= smallest:
                unused += rec.free
            else:
                fragmented += rec.free
        return IdleGpus(held, gang_owned, fragmented, unused, self._pending_gpus)

    def node_state(self, node_name: str) -> NodeState:
        """The node's current state as the engine sees it."""
        return self.capacity.by_name[node_name].state

    # ------------------------------------------------------------------ the cycle

    def cycle(self, now: float, usage: Mapping[str, float], explain: bool = False) -> CycleResult:
        """Run one scheduling cycle at ``now`` and apply its decisions to the state.

        ``usage`` is charged GPU-seconds per project over the sliding window ending at
        ``now``. Started workloads become running; preempted ones go back to pending with
        their submit time kept; drained nodes become ``drained``.
        """
        result = CycleResult()
        params = self.params
        dirty_before = self._dirty
        released = self._release_deadlines(now)
        requeue: list[Job] = []
        self._drain(now, result, requeue)
        projects = self._projects
        if projects is None:
            projects = self._projects = sorted(self._work_per_project)
        usage_order = None
        if (
            self.incremental
            and not explain
            and not self._dirty
            and not requeue
            and now < self._next_timer
            and now - self._last_cycle < params.preemption_recheck
            and self._last_order is not None
        ):
            usage_order = self.policy.usage_order(self.tree, usage, projects)
            if usage_order == self._last_usage_order:
                # Only time passed and the order usage makes is the same: so is the whole
                # group order, and this cycle would be quiet (below) without building a view.
                return result

        inputs = CycleInputs(
            tree=self.tree,
            usage=usage,
            projects=projects,
            allocated=self._alloc,
            charged_allocated=self._charged_alloc,
            debug_allocated=self._debug_alloc,
            swapped=self.swapped_gpus() if self._swapped or self._stopping else None,
            evictable=self._evictable_gpus,
            healthy_gpus=self.capacity.healthy_gpus(),
            now=now,
            params=params,
            usage_order=usage_order,
        )
        view = self.policy.begin(inputs)
        self._last_usage_order = view.usage_order
        order = [g for g in view.groups if (0, g) in self._queues or (1, g) in self._queues]
        first = [g for g in view.guaranteed if (0, g) in self._queues]
        quiet = (
            self.incremental
            and not requeue
            and (first, order) == self._last_order
            and now - self._last_cycle < params.preemption_recheck
        )
        if quiet and self._dirty:
            # Dirty only because runs passed their minimum runtime since a walk that decided
            # nothing: quiet still when no pending workload can use any of them.
            quiet = not dirty_before and bool(released) and not explain
            if quiet and released is not None:
                quiet = not self._releases_matter(released, view, first)
        if quiet and now >= self._next_timer:
            # Woken by timers: quiet still when each is a failed search's memo running out
            # and that search fails again.
            quiet = not explain and self._rechecks_fail(view, now)
        self._last_order = (first, order)
        if quiet and not explain:
            self._dirty = False
            return result
        self._dirty = False
        self._last_cycle = now
        self._next_timer = float("inf")
        self._timers = []

        walk = Walk(self, view, now, result, explain)
        walk.run(order, first)
        # A node whose reservation ended (or changed hands) is an opportunity for everyone
        # who failed while it was held.
        previous = self._last_reserved
        for idx in sorted(previous):
            if walk.reserved.get(idx) != previous[idx]:
                self._log_opportunity(idx)
                self._dirty = True  # the next cycle must look: work may fit there now
        self._last_reserved = dict(walk.reserved)
        for job in requeue + walk.evicted:
            job.queued_at = now
            self._enqueue(job)
        if result.starts or result.preemptions or requeue:
            self._dirty = True
        if explain:
            # Requeued victims may sit in groups that had nothing pending when we began.
            # Groups below their guarantee are offered GPUs first: they come first here too.
            queued = [g for g in view.groups if (0, g) in self._queues or (1, g) in self._queues]
            first = view.guarantee_order(queued)
            rest = [g for g in queued if not view.is_guaranteed(g)]
            walk_reasons.explain(walk, first, rest)
        return result

    # ------------------------------------------------------------------ internals

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
        job.group = self.policy.group(w)
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
        shapes = self._queues.setdefault((job.lane, job.group), {})
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

    def _release_deadlines(self, now: float) -> list[Job] | None:
        """Charged work whose minimum runtime has passed becomes preemptible. Returns those
        workloads, or None when one is its project's first preemptible work (which changes
        which projects' turns a walk takes: see ``_releases_matter``)."""
        heap = self._protected
        released: list[Job] | None = []
        while heap and heap[0][0] <= now:
            _, seq, wid = heapq.heappop(heap)
            job = self._run.get(wid)
            if job is None or job.seq != seq:
                continue
            if released is not None and job.project not in self._evictable:
                released = None
            elif released is not None:
                released.append(job)
            job.evictable = True
            for name in job.placement:
                rec = self.capacity.by_name[name]
                self._log_opportunity(rec.idx, job)
                if job.nodes == 1:
                    rec.hard -= 1
            self._evictable.setdefault(job.project, {})[job.id] = job
            classes = self._evictable_classes.setdefault(job.project, {})
            self._worst_class.pop(job.project, None)
            cls = (-job.w.priority, job.mr)
            classes[cls] = classes.get(cls, 0) + 1
            self._evictable_gpus[job.project] = self._evictable_gpus.get(job.project, 0) + job.gpus
            self._dirty = True
        return released

    def _set_timer(self, at: float, search: Job | None = None) -> None:
        """Make the first cycle at or after ``at`` walk (``search``: the workload whose failed
        search's memo runs out then)."""
        if at < self._next_timer:
            self._next_timer = at
        self._timers.append((at, search))

    def _rechecks_fail(self, view: PolicyView, now: float) -> bool:
        """Is every timer due a failed search whose memo ran out, and does each fail again?

        Asked only when nothing else would make this cycle walk: the walk would then take
        the last one's turns and holds again, and could differ only where a search whose
        memo ran out now finds a victim set. So only those searches are made
        (``walk_victims.recheck``); when all fail, their memos are renewed, and the timers and the
        time of the last walk become what the walk would have left.
        """
        recheck = self.params.preemption_recheck
        due: list[Job] = []
        for at, job in self._timers:
            if at > now:
                continue
            if (
                job is None
                or self._pending.get(job.id) is not job
                or job.fail_pos < 0
                or job.fail_time + recheck > now
                or job.patient_until > now
            ):
                return False
            if job not in due:
                due.append(job)
        if not walk_victims.recheck(Walk(self, view, now, CycleResult(), False), due):
            return False
        timers = [(at, job) for at, job in self._timers if at > now]
        timers.extend((now + recheck, job) for job in due)
        self._timers = timers
        self._next_timer = min((at for at, _ in timers), default=float("inf"))
        self._last_cycle = now
        return True

    def _releases_matter(self, released: list[Job], view: PolicyView, claimants: list[str]) -> bool:
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
            if job.loan_for is not None and job.loan_for in self._pending:
                return True
            if view.may_lose_to_reclaim(job.project, job.gpus, claimants):
                return True
            classes = self._pending_classes.get(job.project)
            if classes and min(classes) < (-job.w.priority, job.mr):
                return True
            if self.policy.consolidates and job.nodes == 1 and self._may_move(job):
                return True
        return False

    def _may_move(self, job: Job) -> bool:
        """Could ``holds.move_for`` move running single-node ``job`` for a pending workload:
        another node has room for it, and some pending single-node workload needs more than
        the free GPUs of ``job``'s node but no more than those plus ``job``'s?"""
        cap = self.capacity
        rec = cap.by_name[next(iter(job.placement))]
        elsewhere = False
        for free in range(cap.max_gpus, job.gpus - 1, -1):
            if any(idx != rec.idx for idx in cap.buckets[free]):
                elsewhere = True
                break
        if not elsewhere:
            return False
        most = min(rec.gpus, rec.free + job.gpus)
        return any(rec.free < gpus <= most for gpus in self._pending_sizes)

    def _drain(self, now: float, result: CycleResult, requeue: list[Job]) -> None:
        """Evict from draining and down nodes what may go; report nodes that emptied."""
        for idx in sorted(self._draining):
            rec = self.capacity.nodes[idx]
            for wid in sorted(rec.running):
                job = self._run[wid]
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
                self._stop(job)
                requeue.append(job)
                result.preemptions.append(Preemption(wid, why, None, "drain"))
            if not rec.running:
                self._draining.discard(idx)
                if rec.state == NodeState.DRAINING:
                    rec.state = NodeState.DRAINED
                    rec.force = False
                    self.capacity.refresh(rec)
                    self.capacity.state_changed()
                    result.drained.append(rec.name)


def _as_remembered(job: Job) -> Workload:
    """``job``'s workload carrying what the engine remembered of it (see ``Workload``)."""
    return dataclasses.replace(
        job.w,
        preemptions=job.preempted,
        queued_at=job.queued_at,
        blocked_since=job.head_since,
        patient_until=job.patient_until or None,
        swapped_for=job.swapped_for,
    )
