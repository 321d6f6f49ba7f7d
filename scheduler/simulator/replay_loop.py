"""The replay's event loop: submissions, finishes, expiries, idle moments and budget changes
applied in time order, an engine cycle after each, its preemptions and starts applied to the
job records (``replay`` describes the rules). Compiled with the records (``native_build``).
"""

from __future__ import annotations

import heapq
import math
from typing import Any, NamedTuple

from scheduler.simulator.budgets import Budget
from scheduler.simulator.ledger import UsageLedger
from scheduler.simulator.replay_records import (
    IDLE_AFTER,
    JobRecord,
    PreemptionEvent,
    ReplayConfig,
    Run,
    checkpointed_seconds,
)
from scheduler.simulator.traces import TraceJob

_FINISH = 0  # finishes sort before min-runtime expiries at the same time
_EXPIRY = 1
_IDLE = 2  # a run becomes idle (after its expiry at the same time)


class AdmittedJobs(NamedTuple):
    """The trace's jobs the cluster can hold, as records and as engine workloads."""

    jobs: list[JobRecord]
    workloads: list[Any]  # the engine's ``Workload`` of each record, same order
    skipped: list[TraceJob]  # asked for more GPUs than the cluster has
    by_id: dict[str, int]  # job id -> index into ``jobs``


class Cluster(NamedTuple):
    """The scheduler the replay drives, and where each of its nodes sits in the GPU rows."""

    sched: Any  # the engine's ``Scheduler`` or a test's stand-in
    node_index: dict[str, int]  # node name -> node index


def to_engine_budget(budget: Budget | None):
    """Convert a simulator ``Budget`` tree into the engine's ``BudgetNode`` tree."""
    if budget is None:
        return None
    from scheduler.engine import BudgetNode

    return BudgetNode(
        name=budget.name,
        share=budget.share,
        children=[to_engine_budget(c) for c in budget.children],
    )


class EventLoop:
    """The replay's state between events, and the steps of one event time."""

    def __init__(
        self,
        config: ReplayConfig,
        admitted: AdmittedJobs,
        cluster: Cluster,
        ledger: UsageLedger,
        changes: list[tuple[float, Budget | None]],
    ) -> None:
        self.jobs = admitted.jobs
        self.workloads = admitted.workloads
        self.by_id = admitted.by_id
        self.sched: Any = cluster.sched
        self.node_index = cluster.node_index
        self.ledger = ledger
        self.changes = changes
        self.gpn = config.gpus_per_node
        # Free GPU slots per node, lowest first, so the timeline can draw one row per GPU.
        self.free_slots = [list(range(self.gpn)) for _ in range(config.nodes)]
        self.runs: list[Run] = []
        self.preemptions: list[PreemptionEvent] = []
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.ckpt = config.checkpoint_interval
        self.overhead = config.restart_overhead
        self.record_runs = config.record_runs
        self.interval = config.cycle_interval
        self.max_gap = config.max_cycle_interval
        self.gap = config.cycle_interval
        self.wake = config.wake_at_min_runtime
        self.wake_at_timers = config.wake_at_timers
        self.until = config.until
        self.submit_i = 0
        self.change_i = 0
        self.next_tick = math.inf
        self.cycles = 0
        self.tick_cycles = 0

    def run(self, start: float) -> float:
        """Apply every event and run the cycles they call for; the time the replay stopped."""
        jobs = self.jobs
        n = len(jobs)
        heap = self.heap
        changes = self.changes
        now = start
        while True:
            t_submit = jobs[self.submit_i].submit if self.submit_i < n else math.inf
            t_event = heap[0][0] if heap else math.inf
            t_change = changes[self.change_i][0] if self.change_i < len(changes) else math.inf
            t_tick = self.next_tick
            if self.wake_at_timers and t_tick < math.inf:
                # A timer due sooner is a tick of its own (it backs off the same way).
                t_timer = self.sched.next_wait_timer(now)
                if now < t_timer < t_tick:
                    t_tick = t_timer
            t = min(t_submit, t_event, t_tick, t_change)
            if t == math.inf or (self.until is not None and t > self.until):
                break
            now = t
            self.ledger.advance(t)
            self.apply_events(t)
            self.apply_budget_changes(t)
            self.submit_due(t)
            if not self.sched.pending_count():
                self.next_tick = math.inf
                continue
            tick_only = t == t_tick and t != t_submit and t != t_event
            if not self.cycle(t, tick_only):
                break  # the cluster is empty and nothing more can start: those jobs never run
        return now

    def end_run(self, rec: JobRecord, j: int, t: float, preempted: bool) -> None:
        """Close the current run of ``jobs[j]`` at ``t``: free its GPUs, record it."""
        ledger = self.ledger
        gpn = self.gpn
        lane = {"free": rec.run_gpus} if rec.min_runtime <= 0 else {"charged": rec.run_gpus}
        ledger.change(rec.project, t, **{k: -v for k, v in lane.items()})
        for row in rec.run_rows:
            self.free_slots[row // gpn].append(row % gpn)
        assert rec.run_start is not None  # it ran: set when it started
        if self.record_runs:
            self.runs.append(
                Run(
                    j,
                    rec.run_start,
                    t,
                    rec.run_protected_until,
                    preempted,
                    rec.run_gpus,
                    rec.run_rows,
                )
            )
        idle_from = rec.run_idle_from
        if idle_from is not None:
            if rec.min_runtime > 0 and t > idle_from:  # the free lane is never charged
                rec.idle_spans.append((idle_from, t, rec.run_gpus))
            rec.run_idle_from = None
        rec.run_start = None
        rec.run_rows = ()
        rec.run_gpus = 0

    def apply_events(self, t: float) -> None:
        """Apply the finishes and idle moments due by ``t`` (expiries only wake the loop)."""
        heap = self.heap
        jobs = self.jobs
        sched = self.sched
        while heap and heap[0][0] <= t:
            _, kind, _, j, gen = heapq.heappop(heap)
            rec = jobs[j]
            if gen != rec.gen or kind == _EXPIRY:
                continue  # a stale event of a preempted run, or an expiry (it only wakes us)
            if kind == _IDLE:
                sched.set_idle(rec.id, True)
                rec.run_idle_from = t
                continue
            sched.finish(rec.id)
            if rec.min_runtime > 0:  # free-lane work asks for nothing owed
                self.ledger.change(rec.project, t, demand=-rec.gpus)
            self.end_run(rec, j, t, preempted=False)
            rec.end = t
            rec.remaining = 0.0

    def apply_budget_changes(self, t: float) -> None:
        """Hand the engine every budget tree that took effect by ``t``."""
        changes = self.changes
        while self.change_i < len(changes) and changes[self.change_i][0] <= t:
            self.sched.set_budget(to_engine_budget(changes[self.change_i][1]))
            self.change_i += 1

    def submit_due(self, t: float) -> None:
        """Submit every job whose submission time is ``t`` or earlier."""
        jobs = self.jobs
        n = len(jobs)
        while self.submit_i < n and jobs[self.submit_i].submit <= t:
            rec = jobs[self.submit_i]
            self.sched.submit(self.workloads[self.submit_i])
            if rec.min_runtime > 0:
                self.ledger.change(rec.project, t, demand=rec.gpus)
            self.submit_i += 1

    def cycle(self, t: float, tick_only: bool) -> bool:
        """Run one engine cycle at ``t`` and apply its decisions; False when nothing can ever
        start again (nothing runs, nothing more arrives, the cycle started nothing)."""
        sched = self.sched
        result = sched.cycle(t, self.ledger.usage(t))
        self.cycles += 1
        if tick_only:
            self.tick_cycles += 1
        if tick_only and not result.starts and not result.preemptions:
            self.gap = min(
                self.gap * 2, self.max_gap
            )  # time alone changed nothing: look less often
        else:
            self.gap = self.interval

        # Preemptions first: they free the GPU slots the starts of this cycle reuse.
        for order in result.preemptions:
            self.preempt(t, order)
        for order in result.starts:
            self.start(t, order)

        if sched.pending_count():
            if (
                not self.heap
                and self.submit_i == len(self.jobs)
                and self.change_i == len(self.changes)
                and not result.starts
                and not sched.running
            ):
                return False
            self.next_tick = t + self.gap
        else:
            self.next_tick = math.inf
        return True

    def preempt(self, t: float, order: Any) -> None:
        """Apply the engine's preemption ``order`` at ``t``: work lost, run ended, requeued."""
        j = self.by_id[order.workload_id]
        rec = self.jobs[j]
        assert rec.run_start is not None  # it runs: set when it started
        ran = t - rec.run_start
        if rec.resumable:
            saved = checkpointed_seconds(ran, rec.remaining, self.ckpt)
            lost = ran - saved + self.overhead
            rec.remaining = rec.remaining - saved + self.overhead
        else:
            lost = ran
            rec.remaining = rec.duration
        lost_gpu_seconds = lost * rec.run_gpus
        rec.lost_gpu_seconds += lost_gpu_seconds
        rec.preemptions += 1
        rec.gen += 1
        self.preemptions.append(PreemptionEvent(t, j, order.kind, order.by, lost_gpu_seconds))
        self.end_run(rec, j, t, preempted=True)
        rec.requeues.append((t, None))

    def start(self, t: float, order: Any) -> None:
        """Apply the engine's start ``order`` at ``t``: take its GPU slots, schedule its end
        (and its expiry and idle moment when they come first)."""
        j = self.by_id[order.workload_id]
        rec = self.jobs[j]
        if rec.first_start is None:
            rec.first_start = t
        elif rec.requeues and rec.requeues[-1][1] is None:
            rec.requeues[-1] = (rec.requeues[-1][0], t)
        gpus = 0
        rows: list[int] = []
        gpn = self.gpn
        for name, count in order.placement.items():
            i = self.node_index[name]
            slots = self.free_slots[i]
            if count > len(slots):
                raise RuntimeError(
                    f"engine placed {count} GPUs of {rec.id} on {name}, which has {len(slots)} free"
                )
            slots.sort()
            rows.extend(i * gpn + s for s in slots[:count])
            del slots[:count]
            gpus += count
        rec.run_start = t
        rec.run_protected_until = order.protected_until or t + rec.min_runtime
        rec.run_gpus = gpus
        rec.run_rows = tuple(rows)
        if rec.min_runtime <= 0:
            self.ledger.change(rec.project, t, free=gpus)
        else:
            self.ledger.change(rec.project, t, charged=gpus)
        heap = self.heap
        self.seq += 1
        heapq.heappush(heap, (t + rec.remaining, _FINISH, self.seq, j, rec.gen))
        if self.wake and t < rec.run_protected_until < t + rec.remaining:
            self.seq += 1
            heapq.heappush(heap, (rec.run_protected_until, _EXPIRY, self.seq, j, rec.gen))
        if rec.idle_prone:
            idle_at = max(rec.run_protected_until, t + IDLE_AFTER)
            if idle_at < t + rec.remaining:  # it ends before: never idle
                self.seq += 1
                heapq.heappush(heap, (idle_at, _IDLE, self.seq, j, rec.gen))
