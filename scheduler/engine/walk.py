"""The admission walk of one cycle: offer capacity in policy order, preempt, reserve, explain.

``Scheduler.cycle`` builds a ``Walk`` and runs it; see ``state.py`` for the cost model.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Container, Iterable, Sequence
from typing import TYPE_CHECKING

from scheduler.engine import holds
from scheduler.engine import reasons as words
from scheduler.engine.model import CycleResult, NodeState, Preemption, Start
from scheduler.engine.placement import NodeRec, split_gang
from scheduler.engine.policies import PolicyView
from scheduler.engine.preemption import (
    SearchResult,
    VictimChoice,
    busy_cost,
    gang_search,
    single_node_search,
)
from scheduler.engine.records import Job, lost_gpu_seconds

if TYPE_CHECKING:
    from scheduler.engine.state import QueueEntry, Scheduler

# (gpus, nodes); variable-length in the annotation so the native build keeps it a Python
# tuple (a dict key), not a C struct boxed anew at every lookup
_Shape = tuple[int, ...]


class Walk:
    """One admission walk over the pending queues (the body of ``Scheduler.cycle``).

    It reads and updates the scheduler's private indexes directly: the walk and the
    scheduler are one mechanism split in two files for size, not two components.
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
        self.reserve_budget = int(self.params.max_reserved_fraction * self.cap.healthy_nodes())
        self.evicted: list[Job] = []
        self.notes: dict[str, str] = {}  # job id -> why it did not start (explain)
        self._lost: dict[str, float] = {}
        self._pools: dict[str | None, list[tuple[float, str, Job]]] = {}
        self._shape_phrases: dict[_Shape, str] = {}
        # the protected runs by when their protection ends, as of the scheduler's
        # sequence number (a start or a stop changes it): see _next_victim_in
        self._protected_order: tuple[int, list[tuple[float, int, str]]] | None = None
        self._by_use: list[tuple] | None = None  # see _nodes_by_use
        self._skip_held: Container[int] = self.reserved
        self._stop = False
        # group -> (starts, preemptions, answer) of its last ``_group_may_preempt``: the
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
        queues = s._queues
        # Free GPUs on held nodes still serve work that may borrow them.
        self._skip_held = () if s.policy.lends_holds else self.reserved
        for group in guaranteed:
            shapes = queues.get((0, group))
            if shapes:
                self._walk_group(0, group, shapes, guaranteed_only=True)
        # Teams an eviction of that pass took below their guarantee come next, so the GPUs
        # it freed beyond the preemptor's need go back to them, not above someone else's.
        if self.evicted:
            walked = set(guaranteed)
            for group in self.view.guarantee_order(order):
                if group not in walked:
                    shapes = queues.get((0, group))
                    if shapes:
                        self._walk_group(0, group, shapes, guaranteed_only=True)
        if s.policy.short_first:
            # Short work first above the guarantee: debug-class heads of every group, in
            # window order, before any longer work. They return what they take soonest.
            short = s._pending_short
            for group in order:
                shapes = queues.get((0, group))
                if not shapes or group not in short:
                    # Nothing for this pass. (Skipping it before ``_worth_walking`` loses no
                    # early end of the pass: when it would say no later group can act, the
                    # next group walked says so too.)
                    continue
                if not self._worth_walking(0, group, shapes):
                    if self._stop:
                        break
                    continue
                self._walk_group(0, group, shapes, short_only=True)
        for lane in (0, 1):
            if lane == 1 and not s.policy.free_lane:
                break
            for group in order:
                shapes = queues.get((lane, group))
                if not shapes:
                    continue
                if not self._worth_walking(lane, group, shapes):
                    if self._stop:
                        break
                    continue
                self._walk_group(lane, group, shapes)
        for key in [k for k, shapes in queues.items() if not shapes]:
            del queues[key]

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
        return bool(s._free_running) or self._group_may_preempt(group, shapes)

    def _group_may_preempt(self, group: str, shapes: dict[_Shape, list[QueueEntry]]) -> bool:
        """Could some head of ``group`` evict anyone (free lane aside)? Cheap and permissive.
        Asked again by a later pass of the same walk, it answers from memory unless the walk
        started or evicted something since (nothing else it reads changes inside a walk)."""
        stamp = (len(self.result.starts), len(self.result.preemptions))
        seen = self._may_preempt_seen.get(group)
        if seen is not None and (seen[0], seen[1]) == stamp:
            return seen[2]
        answer = self._group_may_preempt_now(group, shapes)
        self._may_preempt_seen[group] = (stamp[0], stamp[1], answer)
        return answer

    def _group_may_preempt_now(self, group: str, shapes: dict[_Shape, list[QueueEntry]]) -> bool:
        s = self.s
        if s._evictable and self.view.group_may_reclaim(group):
            return True
        if group not in s._evictable:
            return False
        for heap in shapes.values():
            job = s._head(heap)
            if job is not None and self._may_evict_own(job):
                return True
        return False

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
        # (key, sequence number, shape, head): the sequence numbers are unique, so the
        # heap never compares further. Inside one group's turn a head changes only when it
        # starts (nothing else here starts or requeues pending work), and then the next one
        # of its shape is pushed.
        heads: list[tuple] = []
        for shape in list(shapes):
            job = s._head(shapes[shape])
            if job is None:
                del shapes[shape]
                continue
            if short_only and not self._short(job):
                continue  # the short pass would skip it (below) anyway
            heads.append((job.key, job.seq, shape, job))
        if not heads:
            return
        heapq.heapify(heads)
        first_blocked = True
        while heads:
            _, _, shape, job = heapq.heappop(heads)
            heap = shapes[shape]
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
                    heapq.heappush(heads, (nxt.key, nxt.seq, shape, nxt))
                continue
            if first_blocked and not short_only:
                # Only the head of a group's turn reserves (EASY-style backfill per group);
                # a workload refused by a policy cap has nothing to wait for on the nodes.
                # In the guarantee pass, a single-node workload that would take its team
                # past its entitlement holds nothing against other teams' guaranteed work.
                first_blocked = False
                overshoots = guaranteed_only and job.nodes == 1 and not view.may_reclaim(job)
                if lane == 0 and not overshoots and view.cap_block(job) is None:
                    self._reserved_for.add(job.id)
                    self._reserve(job)
                    if self.explain_on:
                        self.notes[job.id] = self._blocked_phrase(job)

    # -- one workload

    def _try(self, job: Job, lane: int) -> bool:
        """Start ``job`` if it fits, else by preempting; remember a failure (see below).

        A failure is remembered on the job (position in the opportunity log, policy
        signature, time) unless a reserved node could have served it. While no node's free
        GPUs or preemptible work grew since, the signature holds and ``preemption_recheck``
        has not passed, the next attempt costs a few comparisons; when some nodes changed,
        only those are searched for victims.
        """
        view, cap, s = self.view, self.cap, self.s
        blocked = view.cap_block(job)
        if blocked is not None:
            self._note(job, blocked)
            return False
        preempts = lane == 0 and job.charged and s.policy.preempts
        sig = view.signature(job) if preempts else None
        log_len = len(s._opp_log)
        memo_ok = (
            job.fail_pos >= 0
            and (view.still_blocked(job.fail_sig, sig) if preempts else job.fail_sig == sig)
            and self.now - job.fail_time < self.params.preemption_recheck
        )
        if memo_ok and preempts:
            # When the memo runs out, a search may find what the signature could not show
            # (and patience is weighed again): the scheduler must not sleep through that.
            s._set_timer(job.fail_time + self.params.preemption_recheck, job)
        # The memo failed only because some teams' room to be reclaimed from grew: the new
        # search is a full one in all but where it looks (those teams' work, and the nodes
        # that changed), so it is booked as a full one.
        grown: list[str] | None = None
        if (
            not memo_ok
            and preempts
            and job.nodes == 1
            and job.fail_pos >= 0
            and s.incremental
            and self.now - job.fail_time < self.params.preemption_recheck
        ):
            grown = view.grown_since(job.fail_sig, sig)
        # A node held for someone when the job failed is free for it again when this walk
        # has not (or not yet) held it: holds are made afresh in every walk.
        released: list[int] = []
        if (memo_ok or grown is not None) and job.fail_held:
            reserved_now = self.reserved
            released = [idx for idx in job.fail_held if idx not in reserved_now]
        if memo_ok and job.fail_pos == log_len and not released:
            # Explaining or not, the same search is skipped (the live loop, which explains,
            # decides what the simulator does); the reason is the one a failed search gives.
            self._note(job, None)
            return False
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
        if lane == 0 and holds.loanable(self, job) and holds.borrow(self, job):
            return True
        if preempts and self._preemptions_left() <= 0:
            job.fail_pos = -1  # this cycle's evictions are spent: look again next cycle
            self._note(job, None)
            return False
        if preempts and job.patient_until > self.now:
            # Still waiting out its patience for a victim set already found: that is not a
            # failed search, so no memo (it would outlive the patience); look again then.
            job.fail_pos = -1
            s._set_timer(job.patient_until)
            self._note(job, None)
            return False
        if preempts and self._may_find_victims(job):
            eligible = self._eligible_for(job)
            only = None
            if memo_ok:
                only = self._fresh_nodes(job.fail_pos, eligible) + released
            elif grown is not None:
                only = self._grown_nodes(grown, job, self._fresh_nodes(job.fail_pos, eligible))
                if only is not None:
                    only += released
            if only is not None and not only:
                # Nothing the failed search depended on changed for this job (workloads
                # that passed their minimum runtime are no victims of its): it fails again.
                started = over_budget = False
            else:
                started, over_budget = self._preempt(
                    job, only if job.nodes == 1 else None, eligible
                )
            if started:
                return True
            if over_budget:
                job.fail_pos = -1  # a victim set exists: look again next cycle
                self._note(job, None)
                return False
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
            self._note(job, self._blocked_phrase(job))
        return False

    def recheck(self, jobs: list[Job]) -> bool:
        """Search again, as each one's turn in an unchanged walk would, for ``jobs``: pending
        workloads whose failed search's memo ran out (``Scheduler._rechecks_fail``). True
        when none finds a victim set; their memos are then renewed as of now.

        The nodes held when a search last failed stay out of it (``fail_held``: the walk
        would hold them, and maybe more, before that turn), so no search here looks at fewer
        nodes than the walk's would: when all fail here, the walk's fail too.
        """
        for job in jobs:
            if not self._may_find_victims(job):
                continue
            if self._search(job, None, self._eligible_for(job), job.fail_held).choice is not None:
                return False
        log_len = len(self.s._opp_log)
        for job in jobs:
            job.fail_time = self.now
            job.fail_pos = log_len
            job.fail_sig = self.view.signature(job)
        return True

    def _launch(self, job: Job, recs: list[NodeRec], why: str) -> None:
        amounts = [job.gpus] if job.nodes == 1 else split_gang(job.gpus, job.nodes)
        self.s._start(job, recs, amounts, self.now)
        self._by_use = None
        job.head_since = None
        job.patient_until = 0.0  # a patience belongs to one pending spell, not the next
        job.fail_pos = -1
        self.view.started(job)
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

    # -- preemption

    def _lost_of(self, job: Job) -> float:
        lost = self._lost.get(job.id)
        if lost is None:
            p = self.params
            lost = lost_gpu_seconds(job, self.now, p.checkpoint_interval, p.restart_overhead)
            self._lost[job.id] = lost
        return lost

    def _pool_of(self, key: str | None) -> list[tuple[float, str, Job]]:
        """Preemptible running work of one project (``None``: the free lane), cheapest
        lost-per-GPU first; built once a cycle per project, on first use."""
        pool = self._pools.get(key)
        if pool is None:
            s = self.s
            jobs = s._free_running.values() if key is None else s._evictable[key].values()
            pool = self._pools[key] = sorted((self._lost_of(j) / j.gpus, j.id, j) for j in jobs)
        return pool

    def _may_find_victims(self, job: Job) -> bool:
        """Cheap gate before any search: could anyone at all be a victim of ``job``?"""
        s = self.s
        if s.policy.free_lane and s._free_running:
            return True
        if job.project in s._evictable and self._may_evict_own(job):
            return True
        return bool(s._evictable) and self.view.may_reclaim(job)

    def _short(self, job: Job) -> bool:
        """Is ``job`` charged debug-class work (minimum runtime at most ``debug_min_runtime``)?"""
        return job.charged and job.mr <= self.params.debug_min_runtime

    def _may_evict_own(self, job: Job) -> bool:
        """Does ``job``'s project run evictable work of a lower class than ``job`` (class:
        priority, then minimum runtime; a project's own work yields only to a higher one)?"""
        worst_priority, worst_mr = self._own_worst(job.project)
        own = -job.w.priority
        return worst_priority > own or (worst_priority == own and worst_mr > job.mr)

    def _own_worst(self, project: str) -> tuple[int, float]:
        """The lowest class (priority, minimum runtime) among a project's evictable work
        (kept on the scheduler until the project's evictable work changes)."""
        s = self.s
        if not s.incremental:
            return max((-j.w.priority, j.mr) for j in s._evictable[project].values())
        worst = s._worst_class.get(project)
        if worst is None:
            worst = s._worst_class[project] = max(s._evictable_classes[project])
        return worst

    def _victim_pool(
        self, job: Job, reclaim: bool | None = None
    ) -> Iterable[tuple[float, str, Job]]:
        """Everything ``job`` might preempt, merged cheapest first, projects pre-filtered.

        Projects the policy refuses even for a one-GPU victim (the most permissive case)
        are left out before any of their workloads is looked at.
        """
        s, view = self.s, self.view
        sources = []
        if s.policy.free_lane and s._free_running:
            sources.append(self._pool_of(None))
        if job.project in s._evictable and self._may_evict_own(job):
            sources.append(self._pool_of(job.project))
        if view.may_reclaim(job) if reclaim is None else reclaim:
            for project in sorted(s._evictable):
                if project != job.project and view.may_preempt_project(job, project, 1):
                    sources.append(self._pool_of(project))
        if len(sources) == 1:
            return sources[0]
        return heapq.merge(*sources)

    def _eligible_for(self, job: Job, reclaim: bool | None = None):
        """The policy's victim rule for ``job``, memoised per victim project (``reclaim``:
        whether it may take other teams' work; by default the policy's ``may_reclaim``)."""
        view, now = self.view, self.now
        project = job.project
        free_lane = self.s.policy.free_lane
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

    def _fresh_nodes(self, since: int, eligible) -> list[int]:
        """Node positions of the opportunity log from ``since`` on that may serve a job whose
        victim rule is ``eligible``. An entry made only because a workload passed its minimum
        runtime is left out when that workload is no victim of the job's: nothing else about
        its node changed, so the node is as it was when the job's search failed there (any
        other change on it has an entry of its own). Only for a policy whose signature
        follows every new victim (``PolicyView.victims_follow_signature``)."""
        s = self.s
        log, why = s._opp_log, s._opp_why
        if not s.incremental or not self.view.victims_follow_signature:
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

    def _grown_nodes(self, teams: list[str], job: Job, fresh: list[int]) -> list[int] | None:
        """``fresh`` plus the nodes running preemptible work of ``teams`` (other than
        ``job``'s own): where a search that failed can succeed once only those teams' room
        to be reclaimed from grew. None when that is a large part of the cluster (a full
        search is then as cheap)."""
        s = self.s
        by_name = self.cap.by_name
        limit = len(self.cap.nodes) // 2
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

    def _limit_for(self, job: Job):
        """The policy's limit on what one choice of ``job`` takes from each other team
        (``PolicyView.reclaim_limit``), memoised per team, as the searches' ``limit``."""
        view, project = self.view, job.project
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

    def _preemptions_left(self) -> int:
        return self.params.max_preemptions_per_cycle - len(self.result.preemptions)

    def _search(
        self, job: Job, only: list[int] | None, eligible, skip: Container[int]
    ) -> SearchResult:
        """The cheapest victim set for ``job`` under its rule ``eligible``, leaving out the
        nodes in ``skip`` (``only``: for a single-node job, just these node positions)."""
        pool = self._victim_pool(job) if only is None else ()
        limit = self._limit_for(job)
        run, cap, lost = self.s._run, self.cap, self._lost_of
        if job.nodes == 1:
            # While some run is idle the pool's lost-per-GPU order bounds nothing: an idle
            # victim's node may be the best whatever it loses (``single_node_search``).
            prune = not self.s._idle_runs
            return single_node_search(job, pool, run, cap, skip, eligible, lost, only, limit, prune)
        return gang_search(job, pool, run, cap, skip, eligible, lost, limit)

    def _preempt(self, job: Job, only: list[int] | None, eligible) -> tuple[bool, bool]:
        """Start ``job`` by evicting the cheapest eligible set, if one exists.

        ``only``: search just these node positions (the rest cannot have become feasible
        since the job last failed). ``eligible``: ``_eligible_for(job)``. Returns (started,
        a reserved node could have served).
        """
        s = self.s
        choice = self._search(job, only, eligible, self.reserved).choice
        if choice is not None and len(choice.victims) > self._preemptions_left():
            return False, True  # over this cycle's eviction budget: try again next cycle
        if choice is None:
            return False, False
        # Break-even patience: an eviction throws away ``choice.lost`` GPU-seconds; waiting
        # costs the preemptor its GPUs x the wait. Evict only once the wait has cost as much
        # as the eviction would lose: work that frees GPUs before then (on a busy cluster,
        # something ends every few minutes) serves the job without losing anyone's work.
        # The free lane agreed to be evicted at any moment: its loss does not count.
        if s.policy.patient:
            charged_lost = sum(self._lost_of(v) for v in choice.victims if v.charged)
            patience = charged_lost / job.gpus
            if job.mr <= self.params.debug_min_runtime:
                # A person at a prompt waits for a slot to free up to about as long as the
                # protection they asked for, not for hours of someone's training to pay off.
                patience = min(patience, job.mr)
            ready_at = job.queued_at + patience
            if self.now < ready_at:
                # Look again when the patience is over (the search is the costly part).
                job.patient_until = ready_at
                s._set_timer(ready_at)
                return False, True
        self._evict_and_start(job, choice)
        return True, False

    def _evict_and_start(self, job: Job, choice: VictimChoice, why: str | None = None) -> None:
        """Evict ``choice.victims`` (each told why and what it loses, ``why`` or the policy's
        reason), then start ``job``."""
        s, view = self.s, self.view
        for victim in choice.victims:
            why_this = why if why is not None else view.why(job, victim)
            reason = (
                f"preempted by {job.id} ({job.project}): {why_this}; "
                f"loses {words.gpu_hours(self._lost_of(victim))} of work"
            )
            s._stop(victim)
            victim.preempted += 1
            self._by_use = None
            view.evicted(victim)
            if victim.project == job.project and victim.charged:
                # A swap: the team chose it, so the victim's GPUs still count towards the
                # team's claim to reclaim while ``job`` runs (``Workload.swapped_for``).
                victim.swapped_for = job.id
                view.swapped_out(victim)
            self.evicted.append(victim)
            self.result.preemptions.append(Preemption(victim.id, reason, job.id, "preempt"))
        names = ", ".join(v.id for v in choice.victims)
        self._launch(
            job,
            choice.nodes,
            f"preempted {names} ({words.gpu_hours(choice.lost)} lost) to start on "
            + ", ".join(r.name for r in choice.nodes),
        )

    def _clear_for_gang(self, job: Job) -> bool:
        """Start a gang that waited past its bound by clearing whole nodes, if allowed now.

        The guarantee serves gangs too: a gang of a team below its entitlement takes empty
        nodes and nodes whose work it may evict (past its minimum runtime: what other teams
        run above their entitlement, the free lane, or its own project's lower class). Nodes
        are taken fewest GPU-hours lost first, skipping any whose eviction would take a team
        below its entitlement together with the nodes already taken (``gang_victims_ok``),
        so one team that cannot spare its work does not keep the gang waiting while other
        nodes could serve it.
        """
        view = self.view
        if not view.may_clear_for_gang(job) or self._preemptions_left() <= 0:
            return False
        s = self.s
        log = s._opp_log
        # Memo of a failure: a node only becomes clearable through an entry in the
        # opportunity log (work on it stopped or passed its minimum runtime, free-lane work
        # landed, its state changed), and only becomes admissible on its own when a team's
        # room to be reclaimed from grows. If too few nodes were admissible at the last
        # failure, even counting every node logged since, and no team has more room, this
        # attempt fails too. A debug-class gang's own-project victims depend on the debug
        # allowance, which moves without a log entry: no memo for it.
        memo = s.incremental and job.mr > self.params.debug_min_runtime
        room = view.reclaimable() if memo else {}
        if memo and job.clear_pos >= 0:
            fresh = log[job.clear_pos :]
            old = job.clear_room
            if job.clear_count + min(len(fresh), len(set(fresh))) < job.nodes and all(
                gpus <= old.get(p, 0) for p, gpus in room.items()
            ):
                return False
        log_len = len(log)
        admissible, options = self._clear_options(job)
        if admissible < job.nodes:
            if memo:
                job.clear_pos, job.clear_count, job.clear_room = log_len, admissible, room
            return False
        if len(options) < job.nodes:
            return False
        # Nodes whose work is idle first (the busy part of their loss; equal to the whole
        # loss when nothing on them is idle, so the plain order without idle runs).
        options.sort(
            key=lambda o: (busy_cost([(self._lost_of(v), v) for v in o[3]])[0], o[0], o[1])
        )
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
        if len(evict) > self._preemptions_left():
            return False
        nodes = sorted((o[2] for o in chosen), key=lambda r: r.idx)
        self._evict_and_start(job, VictimChoice(nodes, evict, sum(o[0] for o in chosen)))
        return True

    def _clear_options(
        self, job: Job
    ) -> tuple[int, list[tuple[float, int, NodeRec, list[Job], dict[str, int]]]]:
        """The nodes gang ``job`` may clear now: (how many are admissible, reserved ones
        included; the unreserved ones as (lost, position, node, its workloads, other teams'
        charged GPUs on it)). See ``_clear_for_gang``."""
        s, view, now, reserved = self.s, self.view, self.now, self.reserved
        eligible = self._eligible_for(job)
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
        for rec in self.cap.nodes:
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
                lost = sum(self._lost_of(v) for v in on_node)
                options.append((lost, rec.idx, rec, on_node, cross))
        return admissible, options

    # -- reservations

    def _reserve(self, job: Job) -> None:
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
        reserved = self.reserved
        s = self.s
        if job.nodes == 1:
            consolidates = s.policy.consolidates and job.charged
            if (
                consolidates
                and self._waited_bound(job)
                and (holds.move_for(self, job) or self._reclaim_one_step(job))
            ):
                return
            if len(reserved) >= self.reserve_budget:
                return
            rec = holds.hold_single(self, job)
            if rec is not None and rec.gpus >= job.gpus:
                reserved[rec.idx] = job.id
            return
        # A gang's wait and its right to have nodes cleared do not depend on the cap on
        # held nodes: clearing holds nothing, and a gang that could not hold because other
        # work held the cap would otherwise never start its wait.
        if not self._waited_bound(job):
            return
        if s.policy.preempts and job.charged and self._clear_for_gang(job):
            return
        if len(reserved) + job.nodes > self.reserve_budget:
            return
        chosen = holds.hold_gang(self, job)
        if chosen is not None:
            for held in chosen:
                reserved[held] = job.id

    def _reclaim_one_step(self, job: Job) -> bool:
        """Start a single-node workload that waited past the hold bound by reclaiming, when
        its team is below its entitlement but the workload alone takes the team past it.

        The guarantee's reclaim asks that the team stay within its entitlement after the
        start, so a team whose smallest workload is larger than what it is still owed could
        never reclaim: one workload is the smallest step it can take (as for a gang,
        ``_clear_for_gang``). The victims are judged as for any reclaim, all of a team's
        together (no team goes below its entitlement), so the team that overshoots cannot be
        reclaimed from by its victims, and the workload itself is larger than what its team
        then runs above its entitlement: it cannot be the victim of a reclaim either.
        """
        view, s = self.view, self.s
        if not s.policy.preempts or view.may_reclaim(job) or not view.may_clear_for_gang(job):
            return False
        if self._preemptions_left() <= 0:
            return False
        # Memo of a failure, as for a gang (``_clear_for_gang``): a node only becomes
        # clearable through an entry in the opportunity log or a hold let go, and a victim
        # only becomes admissible when its team's room grows. Not for debug-class work,
        # whose own-project victims move with the debug allowance.
        memo = s.incremental and job.mr > self.params.debug_min_runtime
        room = view.reclaimable() if memo else {}
        log_len = len(s._opp_log)
        held = tuple(sorted(self.reserved))
        eligible = self._eligible_for(job, reclaim=True)
        only = None
        if (
            memo
            and job.clear_pos >= 0
            and all(gpus <= job.clear_room.get(p, 0) for p, gpus in room.items())
        ):
            # No room grew: only nodes logged since, or let go by a hold, can serve now.
            only = self._fresh_nodes(job.clear_pos, eligible)
            only += [i for i in job.clear_held if i not in held]
            if not only:
                if log_len > job.clear_pos:  # as a search of no node would: it failed
                    job.clear_pos, job.clear_room, job.clear_held = log_len, room, held
                return False
        found = single_node_search(
            job,
            self._victim_pool(job, reclaim=True) if only is None else (),
            s._run,
            self.cap,
            self.reserved,
            eligible,
            self._lost_of,
            only,
            self._limit_for(job),
            not s._idle_runs,  # prune: see ``_search``
        )
        choice = found.choice
        if choice is None:
            if memo:  # every node is known not to serve now, under rooms as large as now
                job.clear_pos, job.clear_room, job.clear_held = log_len, room, held
            return False
        if len(choice.victims) > self._preemptions_left():
            return False
        self._evict_and_start(job, choice)
        return True

    def _waited_bound(self, job: Job) -> bool:
        """Has ``job`` waited ``gang_reserve_after`` blocked at the head of its group? Its
        wait starts now if it had not; until the bound, the scheduler wakes when it ends."""
        if job.head_since is None:
            job.head_since = self.now
        due = job.head_since + self.params.gang_reserve_after
        if self.now < due:
            self.s._set_timer(due)
            return False
        return True

    def _nodes_by_use(self) -> list[tuple]:
        """Healthy nodes as (GPUs in use, busy until, position), sorted: emptiest first, then
        the node whose work becomes preemptible soonest (``_busy_until``), then position.

        Kept on the scheduler across walks and cycles: only the nodes the capacity index
        re-filed since (``Capacity.touched``) are moved, so the gangs of several groups and
        cycles share one order and a start costs a re-filing, not a sort of the cluster.
        Positions are unique, so the kept order is exactly the one a full sort gives.
        """
        if self._by_use is not None:
            return self._by_use
        s, cap = self.s, self.cap
        keys = s._by_use
        touched = cap.touched
        if keys is None or not s.incremental or len(touched) > len(cap.nodes):
            keys = sorted(self._use_key(rec) for rec in cap.nodes if rec.state == NodeState.HEALTHY)
            s._by_use_of = {key[2]: key for key in keys}
        elif touched:
            of = s._by_use_of
            for idx in set(touched):
                old = of.pop(idx, None)
                if old is not None:
                    del keys[bisect_left(keys, old)]
                rec = cap.nodes[idx]
                if rec.state == NodeState.HEALTHY:
                    key = of[idx] = self._use_key(rec)
                    insort(keys, key)
        touched.clear()
        s._by_use = self._by_use = keys
        return keys

    def _use_key(self, rec: NodeRec) -> tuple:
        """``rec``'s place in ``_nodes_by_use``: (GPUs in use, busy until, position)."""
        used = rec.gpus if rec.exclusive is not None else rec.gpus - rec.free
        return (used, self._busy_until(rec), rec.idx)

    def _busy_until(self, rec: NodeRec) -> float:
        """When the last protected workload on ``rec`` becomes preemptible (kept on the node
        until its work changes)."""
        until = rec.busy_until
        if until is None or not self.s.incremental:
            run = self.s._run
            until = max((run[w].protected_until for w in rec.running), default=float("-inf"))
            rec.busy_until = until
        return until

    # -- reasons

    def _note(self, job: Job, text: str | None) -> None:
        if self.explain_on:
            self.notes[job.id] = text if text is not None else self._blocked_phrase(job)

    def _blocked_phrase(self, job: Job) -> str:
        cap = self.cap
        skip = self.reserved
        parts = [
            words.waiting_for(
                job.gpus,
                job.nodes,
                cap.largest_free(skip),
                len(cap.whole_nodes(job.nodes, job.per_node, skip)),
            )
        ]
        held = sorted(self.cap.nodes[i].name for i, w in self.reserved.items() if w == job.id)
        if job.nodes > 1:
            parts.extend(self._gang_phrases(job, held))
        elif held:
            parts.append("holding " + ", ".join(held) + " until they free" + self._lending())
        if job.patient_until > self.now:
            parts.append(words.patience(job.patient_until - self.now))
        elif job.lane == 0 and job.charged and self.s.policy.preempts:
            parts.append(words.next_victim(self._next_victim_in(job)))
        return "; ".join(parts)

    def _lending(self) -> str:
        if not self.s.policy.lends_holds:
            return ""
        return (
            " (meanwhile short work may borrow their free GPUs; it yields once past its "
            "minimum runtime)"
        )

    def _gang_phrases(self, job: Job, held: list[str]) -> list[str]:
        """Why a gang has not started: what it holds, when it will hold whole nodes or why
        it cannot, and how many of the nodes it needs could be cleared for it now."""
        params, now = self.params, self.now
        if held:
            return [
                f"holding {', '.join(held)} ({len(held)} of the {job.nodes} nodes it needs) "
                "until they free" + self._lending()
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
        budget, taken = self.reserve_budget, len(self.reserved)
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
        if due is None or not (job.charged and self.s.policy.preempts):
            return phrases
        if self.view.may_clear_for_gang(job):
            admissible, _ = self._clear_options(job)
            phrases.append(
                f"{admissible} of the {job.nodes} nodes it needs could be cleared for it now "
                "(empty, or running only work past its minimum runtime that may be preempted "
                "for it)"
            )
        elif not self.view.is_guaranteed(job.project):
            phrases.append(
                "no nodes are cleared for it: its project already runs at least its entitlement"
            )
        elif swapped := self.view.swapped_gpus(job.project):
            phrases.append(
                "no nodes are cleared for it: its project's work swapped out for its own "
                f"debug or higher-priority work ({swapped} GPUs) counts as held while that "
                "work runs"
            )
        return phrases

    def _next_victim_in(self, job: Job) -> float | None:
        """Seconds until the first running workload this job could preempt is preemptible.

        Asked for every blocked head a cycle explains: the protected runs are looked at in
        the order their protection ends (one sort per start or stop, not a pass over every
        run per question), so the answer is usually among the first few."""
        view, run = self.view, self.s._run
        allowed: dict[tuple[str, int], bool] = {}
        for _, seq, wid in self._protected_by_end():
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
            return other.protected_until - self.now
        return None

    def _protected_by_end(self) -> list[tuple[float, int, str]]:
        """The scheduler's protected runs (``Scheduler._protected``: when each protection
        ends, its start's sequence number, the workload), sorted; kept while no run started
        or stopped."""
        s = self.s
        kept = self._protected_order
        if kept is None or kept[0] != s._seq:
            kept = self._protected_order = (s._seq, sorted(s._protected))
        return kept[1]

    def _shape_phrase(self, job: Job) -> str:
        """What the cluster offers for this job's shape now (cached per shape)."""
        phrase = self._shape_phrases.get(job.shape)
        if phrase is None:
            cap, skip = self.cap, self.reserved
            phrase = self._shape_phrases[job.shape] = words.waiting_for(
                job.gpus,
                job.nodes,
                cap.largest_free(skip),
                len(cap.whole_nodes(job.nodes, job.per_node, skip)),
            )
        return phrase

    def explain(self, first: list[str], rest: list[str]) -> None:
        """Fill ``reasons`` and ``order`` for every workload still pending.

        ``first``: groups below their guarantee, ``rest`` the others, each in policy order.
        The order is the order of service: the guaranteed groups' work, then (with
        ``Policy.short_first``) the debug-class work of the rest, then the rest's other work,
        then the free lane.
        """
        s = self.s
        short_first = s.policy.short_first
        guaranteed = set(first)
        served_first: list[str] = []  # guaranteed groups, then short work of the others
        served_next: list[str] = []  # the others' longer work
        free_lane: list[str] = []
        for lane in (0, 1):
            for group in first + rest:
                shapes = s._queues.get((lane, group))
                if not shapes:
                    continue
                jobs = sorted(
                    (j for heap in shapes.values() for _, seq, wid in heap
                     if (j := s._pending.get(wid)) is not None and j.seq == seq),
                    key=lambda j: j.key,
                )  # fmt: skip
                self._explain_group(jobs)
                if lane == 1:
                    free_lane.extend(j.id for j in jobs)
                elif group in guaranteed:
                    served_first.extend(j.id for j in jobs)
                else:
                    for j in jobs:
                        short = short_first and self._short(j)
                        (served_first if short else served_next).append(j.id)
        self.result.order = served_first + served_next + free_lane

    def _explain_group(self, jobs: list[Job]) -> None:
        """The reasons of one group's pending workloads, ``jobs`` in the group's key order."""
        view = self.view
        phrase: dict[str, str] = {}
        for position, job in enumerate(jobs):
            if job.head_since is not None:
                self.result.blocked_since[job.id] = job.head_since
            if job.patient_until > self.now:
                self.result.patient_until[job.id] = job.patient_until
            project = phrase.get(job.project)
            if project is None:
                project = phrase[job.project] = view.project_phrase(job.project)
            if job.lane == 1:
                project += "; free lane (minimum runtime 0): runs on otherwise idle GPUs"
            rank = job.w.burst_rank
            if rank and self._short(job):
                project += (
                    f"; job {rank + 1} of its submitter's burst of debug work (the first of "
                    "every burst, and a lone debug job, go before it)"
                )
            note = self.notes.get(job.id)
            if note is None and position:
                # No count here: it would change for every workload behind one that started,
                # and the reason be rewritten each cycle; the position is shown beside it.
                note = "behind higher-ranked pending work in its queue; " + self._shape_phrase(job)
            elif note is None:
                note = self._blocked_phrase(job) + (
                    "; the free GPUs are taken or reserved by higher-ranked work"
                )
            self.result.reasons[job.id] = f"{project}; {note}"
