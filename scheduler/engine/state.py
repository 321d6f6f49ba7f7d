"""The stateful scheduler: cluster state + a policy; ``cycle`` turns them into orders.

The shared mechanism lives here and in the modules beside it: pending queues and indexes
(``state_indexes``), the admission walk (``walk`` and its ``walk_*`` steps), placement,
backfill with reservations (``holds``), preemption, drain (``state_releases``) and reasons.
Policies (``policies.py``) only say how work is ordered, what may be preempted, and what is
capped.

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
from collections.abc import Mapping

from scheduler.engine import state_quiet, state_releases, walk_reasons
from scheduler.engine.fairtree import BudgetTree
from scheduler.engine.model import BudgetNode, CycleResult, IdleGpus, Node, NodeState, Workload
from scheduler.engine.policies import CycleInputs, PolicyView
from scheduler.engine.records import Job
from scheduler.engine.state_indexes import QueueEntry, SchedulerIndexes
from scheduler.engine.walk import Walk

__all__ = ["QueueEntry", "Scheduler"]


class Scheduler(SchedulerIndexes):
    """Cluster state plus a policy; ``cycle(now, usage)`` decides and applies orders.

    ``nodes``: the cluster's nodes. ``budget_root``: the budget tree (None: no budgets).
    ``policy``: a ``Policy`` or a policy name (default ``fairshare``). All methods are
    deterministic: the same calls in the same order give the same orders.

    ``incremental=False`` turns off every shortcut that only saves work — skipping a cycle
    in which nothing changed, a gang's memo of failed clearings, orders and per-node values
    kept between cycles — and recomputes them each cycle: the reference the shortcuts are
    tested against (they must give the same orders), far slower on a large cluster.

    The queues and indexes it keeps, and how a start or a stop updates them, are its base
    ``SchedulerIndexes`` (``state_indexes.py``); what time and node states release
    (``state_releases``) and when a cycle may skip its walk (``state_quiet``) live beside.
    """

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
            heap = self._queues[job.lane][job.group][job.shape]
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
        dirty_before = self._dirty
        released = state_releases.release_deadlines(self, now)
        requeue: list[Job] = []
        state_releases.drain(self, now, result, requeue)
        view = self._begin_view(now, usage, explain, requeue)
        if view is None:
            return result
        charged, free = self._queues
        order = [g for g in view.groups if g in charged or g in free]
        first = [g for g in view.guaranteed if g in charged]
        quiet = state_quiet.is_quiet(
            self, view, now, first, order, bool(requeue), released, dirty_before, explain
        )
        self._last_order = (first, order)
        if quiet and not explain:
            self._dirty = False
            return result
        self._dirty = False
        self._last_cycle = now
        self._next_timer = float("inf")
        self._timers = []
        self._walk(view, now, result, explain, order, first, requeue)
        return result

    def _begin_view(
        self, now: float, usage: Mapping[str, float], explain: bool, requeue: list[Job]
    ) -> PolicyView | None:
        """This cycle's policy view; None when only time passed since the last cycle and the
        order usage makes is the same (the cycle is then quiet without building a view)."""
        params = self.params
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
                # group order, and this cycle would be quiet (``state_quiet``) anyway.
                return None
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
        return view

    def _walk(
        self,
        view: PolicyView,
        now: float,
        result: CycleResult,
        explain: bool,
        order: list[str],
        first: list[str],
        requeue: list[Job],
    ) -> None:
        """Walk the queues (``Walk``), then requeue what was evicted or drained and, with
        ``explain``, say why each pending workload waits."""
        walk = Walk(self, view, now, result, explain)
        walk.run(order, first)
        # A node whose reservation ended (or changed hands) is an opportunity for everyone
        # who failed while it was held.
        previous = self._last_reserved
        hold_moved = False
        for idx in sorted(previous):
            if walk.reserved.get(idx) != previous[idx]:
                self._log_opportunity(idx)
                hold_moved = True  # the next cycle must look: work may fit there now
        self._last_reserved = dict(walk.reserved)
        for job in requeue + walk.evicted:
            job.queued_at = now
            self._enqueue(job)
        self._dirty = bool(
            hold_moved
            or result.preemptions
            or requeue
            or (result.starts and not state_quiet.starts_settled(self, walk, first))
        )
        if explain:
            # Requeued victims may sit in groups that had nothing pending when we began.
            # Groups below their guarantee are offered GPUs first: they come first here too.
            charged, free = self._queues
            queued = [g for g in view.groups if g in charged or g in free]
            first = view.guarantee_order(queued)
            rest = [g for g in queued if not view.is_guaranteed(g)]
            walk_reasons.explain(walk, first, rest)


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
