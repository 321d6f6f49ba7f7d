"""The admission walk of one cycle: offer capacity in policy order, preempt, reserve, explain.

``Scheduler.cycle`` builds a ``Walk`` and runs it; see ``state.py`` for the cost model.
"""

from __future__ import annotations

import heapq
from collections.abc import Container, Sequence
from typing import TYPE_CHECKING

from scheduler.engine import holds, walk_memo, walk_reasons, walk_reserve, walk_victims
from scheduler.engine.model import CycleResult, Start
from scheduler.engine.placement import NodeRec, split_gang
from scheduler.engine.policies import PolicyView
from scheduler.engine.records import Job, lost_gpu_seconds

if TYPE_CHECKING:
    from scheduler.engine.state import QueueEntry, Scheduler

# (gpus, nodes); variable-length in the annotation so the native build keeps it a Python
# tuple (a dict key), not a C struct boxed anew at every lookup
_Shape = tuple[int, ...]


class Walk:
    """One admission walk over the pending queues (the body of ``Scheduler.cycle``).

    It reads and updates the scheduler's private indexes directly: the walk and the
    scheduler are one mechanism split in files for size, not two components. The steps a
    walk takes beyond offering free capacity live beside it, as functions of the walk:
    ``walk_victims`` (whom to preempt), ``walk_reserve`` (what a blocked head holds or
    clears), ``holds`` (what a hold lends, recalls, moves) and ``walk_reasons`` (why work
    waits).
    """

    def __init__(
        self, sched: Scheduler, view: PolicyView, now: float, result: CycleResult, explain: bool
    ) -> None:
        self.s = sched
        self.view = view
        self.now = now
        self.result = result
        self.explain_on = explain
        self.params = sched.params
        self.cap = sched.capacity
        self.reserved: dict[int, str] = {}
        self._reserved_for: set[str] = set()  # jobs that had their turn to reserve
        # gang -> when it could first have every node it holds (``holds.hold_ready``)
        self.hold_ready: dict[str, float] = {}
        self.hold_ready_latest = float("-inf")  # the latest of ``hold_ready``
        self.reserve_budget = int(self.params.max_reserved_fraction * self.cap.healthy_nodes())
        self.evicted: list[Job] = []
        self.notes: dict[str, str] = {}  # job id -> why it did not start (explain)
        sched._walks += 1
        self.serial = sched._walks  # names this walk in each job's ``lost`` memo
        self._pools: dict[str | None, list[tuple[float, str, Job]]] = {}
        self._shape_phrases: dict[_Shape, str] = {}
        # the protected runs by when their protection ends, as of the scheduler's
        # sequence number (a start or a stop changes it): see walk_reasons.next_victim_in
        self._protected_order: tuple[int, list[tuple[float, int, str]]] | None = None
        self._by_use: list[tuple] | None = None  # see holds.nodes_by_use
        self._skip_held: Container[int] = self.reserved
        self._stop = False
        # A head that did not start (or a group passed over) before a later start saw less
        # than the walk ended with; a walk in which every such failure came after its last
        # start leaves nothing a new walk would decide differently (``state_quiet``).
        self.failed = False
        self.started_after_failure = False
        # group -> (starts, preemptions, answer) of its last ``walk_victims.group_may_preempt``: the
        # answer holds until this walk starts or evicts something.
        self._may_preempt_seen: dict[str, tuple[int, int, bool]] = {}

    # -- the walk

    def run(self, order: list[str], guaranteed: Sequence[str] = ()) -> None:
        """Offer capacity to each group's shape heads in policy order.

        ``guaranteed`` groups first get what keeps them within their guarantee (the
        policy's ``within_guarantee``), in that order; then every group in ``order``.
        With no free GPU left, a group is visited only if one of its heads could preempt
        someone (the policy's cheap group test, or its own project's lower-class work),
        and the walk ends once the policy says no later group can.
        """
        s = self.s
        queues = s._queues[0]  # the charged lane's; the free lane's are read below
        # Free GPUs on held nodes still serve work that may borrow them.
        self._skip_held = () if s.policy.lends_holds else self.reserved
        for group in guaranteed:
            shapes = queues.get(group)
            if shapes:
                self._walk_group(0, group, shapes, guaranteed_only=True)
        # Teams an eviction of that pass took below their guarantee come next, so the GPUs
        # it freed beyond the preemptor's need go back to them, not above someone else's.
        if self.evicted:
            walked = set(guaranteed)
            for group in self.view.guarantee_order(order):
                if group not in walked:
                    shapes = queues.get(group)
                    if shapes:
                        self._walk_group(0, group, shapes, guaranteed_only=True)
        if s.policy.short_first:
            # Short work first above the guarantee: debug-class heads of every group, in
            # window order, before any longer work. They return what they take soonest.
            short = s._pending_short
            for group in order:
                shapes = queues.get(group)
                if not shapes or group not in short:
                    # Nothing for this pass. (Skipping it before ``_worth_walking`` loses no
                    # early end of the pass: when it would say no later group can act, the
                    # next group walked says so too.)
                    continue
                if not self._worth_walking(0, group, shapes):
                    self.failed = True
                    if self._stop:
                        break
                    continue
                self._walk_group(0, group, shapes, short_only=True)
        for lane in (0, 1):
            if lane == 1 and not s.policy.free_lane:
                break
            lane_queues = s._queues[lane]
            for group in order:
                shapes = lane_queues.get(group)
                if not shapes:
                    continue
                if not self._worth_walking(lane, group, shapes):
                    self.failed = True
                    if self._stop:
                        break
                    continue
                self._walk_group(lane, group, shapes)
        for lane_queues in s._queues:
            for key in [k for k, shapes in lane_queues.items() if not shapes]:
                del lane_queues[key]

    def _worth_walking(self, lane: int, group: str, shapes: dict[_Shape, list[QueueEntry]]) -> bool:
        """Could a head of ``group`` start or preempt anything now? When no GPU is free, only
        a group that may preempt someone is walked; ``_stop`` says no later group can."""
        self._stop = False
        # The free lane may backfill onto held nodes (it yields when needed).
        if self.cap.largest_free(() if lane == 1 else self._skip_held) > 0:
            return True
        s = self.s
        if lane == 1 or not s.policy.preempts or self._preemptions_left() <= 0:
            self._stop = True
            return False
        if not s._free_running and not self.view.victims_possible(group):
            self._stop = True
            return False
        return bool(s._free_running) or walk_victims.group_may_preempt(self, group, shapes)

    def _walk_group(
        self,
        lane: int,
        group: str,
        shapes: dict[_Shape, list[QueueEntry]],
        guaranteed_only: bool = False,
        short_only: bool = False,
    ) -> None:
        """Try the group's shape heads in key order. ``guaranteed_only``: only work the
        policy's ``within_guarantee`` admits; the rest waits for the ordinary pass.
        ``short_only``: only charged debug-class heads, and nothing is held (the ordinary
        pass tries them again and holds for the first blocked one)."""
        s = self.s
        view = self.view
        # (key, sequence number, shape, its heap, head): the sequence numbers are unique, so
        # the heap never compares further. Inside one group's turn a head changes only when
        # it starts (nothing else here starts or requeues pending work), and then the next
        # one of its shape is pushed.
        heads: list[tuple] = []
        for shape, heap in list(shapes.items()):
            job = s._head(heap)
            if job is None:
                del shapes[shape]
                continue
            if short_only and not self._short(job):
                continue  # the short pass would skip it (below) anyway
            heads.append((job.key, job.seq, shape, heap, job))
        if not heads:
            return
        heapq.heapify(heads)
        first_blocked = True
        while heads:
            _, _, shape, heap, job = heapq.heappop(heads)
            if guaranteed_only and not view.within_guarantee(job):
                continue  # this shape waits for the ordinary pass
            if short_only and not self._short(job):
                continue
            if job.id in self._reserved_for:
                continue  # blocked earlier in this cycle, and holding what it waits for
            if self._try(job, lane):
                nxt = s._head(heap)
                if nxt is None:
                    del shapes[shape]
                else:
                    heapq.heappush(heads, (nxt.key, nxt.seq, shape, heap, nxt))
                continue
            self.failed = True
            if first_blocked and not short_only:
                # Only the head of a group's turn reserves (EASY-style backfill per group);
                # a workload refused by a policy cap has nothing to wait for on the nodes.
                # In the guarantee pass, a single-node workload that would take its team
                # past its entitlement holds nothing against other teams' guaranteed work.
                first_blocked = False
                overshoots = guaranteed_only and job.nodes == 1 and not view.may_reclaim(job)
                if lane == 0 and not overshoots and view.cap_block(job) is None:
                    self._reserved_for.add(job.id)
                    walk_reserve.reserve(self, job)
                    if self.explain_on:
                        self.notes[job.id] = walk_reasons.blocked_phrase(self, job)

    # -- one workload

    def _try(self, job: Job, lane: int) -> bool:
        """Start ``job`` if it fits, else by preempting; remember a failure (see below).

        A failure is remembered on the job (position in the opportunity log, policy
        signature, time) unless a reserved node could have served it. While no node's free
        GPUs or preemptible work grew since, the signature holds and ``preemption_recheck``
        has not passed, the next attempt costs a few comparisons (unless longer work may now
        borrow a gang's held node, ``holds.may_borrow_later_held``); when some nodes
        changed, only those are searched for victims.
        """
        view, s = self.view, self.s
        blocked = view.cap_block(job)
        if blocked is not None:
            self._note(job, blocked)
            return False
        preempts = lane == 0 and job.charged and s.policy.preempts
        sig = view.signature(job) if preempts else None
        log_len = len(s._opp_log)
        memo_ok = walk_memo.memo_holds(self, job, preempts, sig)
        grown = None if memo_ok else walk_memo.grown_teams(self, job, preempts, sig)
        # A node held for someone when the job failed is free for it again when this walk
        # has not (or not yet) held it: holds are made afresh in every walk.
        released: list[int] = []
        if (memo_ok or grown is not None) and job.fail_held:
            reserved_now = self.reserved
            released = [idx for idx in job.fail_held if idx not in reserved_now]
        if (
            memo_ok
            and job.fail_pos == log_len
            and not released
            and not (lane == 0 and holds.may_borrow_later_held(self, job))
        ):
            # Explaining or not, the same search is skipped (the live loop, which explains,
            # decides what the simulator does); the reason is the one a failed search gives.
            self._note(job, None)
            return False
        if self._start_without_evicting(job, lane):
            return True
        if preempts:
            outcome = self._try_evicting(job, memo_ok, grown, released)
            if outcome is not None:
                return outcome
        # Reserved nodes count as unavailable: the memo remembers which were held, and a
        # later walk that has not held one of them again searches it (above).
        if not memo_ok:
            job.fail_time = self.now
        job.fail_held = tuple(self.reserved)
        if preempts:
            s._set_timer(job.fail_time + self.params.preemption_recheck, job)
        job.fail_pos = log_len
        job.fail_sig = sig
        if self.explain_on:
            self._note(job, walk_reasons.blocked_phrase(self, job))
        return False

    def _start_without_evicting(self, job: Job, lane: int) -> bool:
        """Start ``job`` on free GPUs, on what its hold lent, or on a held node it may
        borrow; True when it started."""
        cap, s = self.cap, self.s
        skip = self.reserved if lane == 0 else ()
        if job.nodes == 1:
            rec = cap.fullest_fit(job.gpus, skip)
            if rec is not None:
                self._launch(job, [rec], "fits")
                return True
        else:
            recs = cap.whole_nodes(job.nodes, job.per_node, skip)
            if len(recs) == job.nodes:
                self._launch(job, recs, "whole nodes free")
                return True
        # What a hold lent comes back before anyone else is evicted, and a short workload
        # borrows a held node before it evicts anyone (``holds``).
        if lane == 0 and job.id in s._loans and holds.recall(self, job):
            return True
        return lane == 0 and holds.loanable(self, job) and holds.borrow(self, job)

    def _try_evicting(
        self, job: Job, memo_ok: bool, grown: list[str] | None, released: list[int]
    ) -> bool | None:
        """Start ``job`` by preempting (True), or give up for this cycle without a memo
        (False: the budget of evictions is spent, or it waits out its patience); None
        when no victim set serves now (a failed search, remembered by ``_try``)."""
        if self._preemptions_left() <= 0:
            job.fail_pos = -1  # this cycle's evictions are spent: look again next cycle
            self._note(job, None)
            return False
        if job.patient_until > self.now:
            # Still waiting out its patience for a victim set already found: that is not a
            # failed search, so no memo (it would outlive the patience); look again then.
            job.fail_pos = -1
            self.s._set_timer(job.patient_until)
            self._note(job, None)
            return False
        if not walk_victims.may_find_victims(self, job):
            return None
        eligible = walk_victims.eligible_for(self, job)
        only = None
        if memo_ok:
            only = walk_victims.fresh_nodes(self, job.fail_pos, eligible) + released
        elif grown is not None:
            fresh = walk_victims.fresh_nodes(self, job.fail_pos, eligible)
            only = walk_victims.grown_nodes(self, grown, job, fresh)
            if only is not None:
                only += released
        if only is not None and not only:
            # Nothing the failed search depended on changed for this job (workloads that
            # passed their minimum runtime are no victims of its): it fails again.
            return None
        started, over_budget = walk_victims.preempt(
            self, job, only if job.nodes == 1 else None, eligible
        )
        if started:
            return True
        if over_budget:
            job.fail_pos = -1  # a victim set exists: look again next cycle
            self._note(job, None)
            return False
        return None

    def _launch(self, job: Job, recs: list[NodeRec], why: str) -> None:
        amounts = [job.gpus] if job.nodes == 1 else split_gang(job.gpus, job.nodes)
        self.view.started(job)  # before ``_start`` ends a swap: the view counts it once
        self.s._start(job, recs, amounts, self.now)
        self.started_after_failure = self.started_after_failure or self.failed
        self._by_use = None
        job.head_since = None
        job.patient_until = 0.0  # a patience belongs to one pending spell, not the next
        job.fail_pos = -1
        placement = dict(job.placement)
        where = ", ".join(sorted(placement))
        if why == "fits":
            reason = f"fits on {where} (fullest node with room)"
        elif why == "whole nodes free":
            reason = f"gang on whole free nodes {where}"
        else:
            reason = why
        if job.lane == 1:
            reason += "; free lane: preemptible at any time"
        self.result.starts.append(
            Start(job.id, placement, reason, job.protected_until, job.loan_for)
        )

    # -- what the walk's steps share (``walk_victims``, ``walk_reserve``, ``holds``)

    def _lost_of(self, job: Job) -> float:
        """GPU-seconds of work ``job`` loses if evicted now (once per walk and workload)."""
        if job.lost_walk == self.serial:
            return job.lost
        p = self.params
        lost = lost_gpu_seconds(job, self.now, p.checkpoint_interval, p.restart_overhead)
        job.lost_walk, job.lost = self.serial, lost
        return lost

    def _short(self, job: Job) -> bool:
        """Is ``job`` charged debug-class work (minimum runtime at most ``debug_min_runtime``)?"""
        return job.charged and job.mr <= self.params.debug_min_runtime

    def _preemptions_left(self) -> int:
        """How many more evictions this cycle allows (``max_preemptions_per_cycle``)."""
        return self.params.max_preemptions_per_cycle - len(self.result.preemptions)

    def _note(self, job: Job, text: str | None) -> None:
        """When explaining, remember why ``job`` did not start (``text``, or what blocks it)."""
        if self.explain_on:
            self.notes[job.id] = (
                text if text is not None else walk_reasons.blocked_phrase(self, job)
            )
