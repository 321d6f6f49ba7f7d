"""Replay a trace through the scheduling engine in virtual time.

The replay is event driven. Events are job submissions, job completions and the moments a
running job reaches its minimum runtime (it becomes a possible victim). All events at one
timestamp are applied together, then the engine runs one cycle. While work is pending, an
extra cycle runs ``cycle_interval`` seconds of virtual time (60 s by default) after the last
one, so decisions that depend only on the passage of time — fair-share ranks drifting as the
window slides, a gang reaching its reservation bound — are taken as a live loop would. While
such periodic cycles change nothing, the gap doubles up to ``max_cycle_interval`` (16 min):
a months-long backlog behind weeks-long jobs would otherwise cost a cycle per virtual minute
for nothing; any event or decision resets it. Nothing runs while nothing is pending.

The simulator, not the engine, knows how long a job runs: on completion it tells the engine
``finish``; on preemption it works out the lost work (time since the last checkpoint plus a
restart overhead for resumable jobs; the whole run otherwise) and the remaining duration.
The engine requeues the preempted workload itself (``docs/engine-api.md``).

Idle allocations. A job whose trace gives a mean GPU utilization below ``IDLE_UTILIZATION``
holds idle GPUs. As the live loop judges a run idle once its GPUs were below that for
``IDLE_AFTER`` while it is past its minimum runtime, a run of such a job becomes idle at the
later of its protection's end (``protected_until``, churn budget included) and its start +
``IDLE_AFTER``: the replay then tells the engine ``set_idle`` (idle runs are the first
victims) and counts its charged GPU time from then to its end as idle (``idle_spans``). A
run that restarts after a preemption starts busy and becomes idle again by the same rule.
Jobs of unknown utilization (every Philly job) are never idle: no event, no figure.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.simulator.budgets import Budget
from scheduler.simulator.contract import ContractRule
from scheduler.simulator.ledger import UsageLedger
from scheduler.simulator.traces import Trace, TraceJob

_FINISH = 0  # finishes sort before min-runtime expiries at the same time
_EXPIRY = 1
_IDLE = 2  # a run becomes idle (after its expiry at the same time)

# The product's idle rule (the live loop's, from telemetry): GPUs below 5 % busy for
# 30 minutes while past the minimum runtime. The replay applies it to a job's mean
# utilization from the trace.
IDLE_UTILIZATION = 0.05
IDLE_AFTER = 1800.0


class ConfigError(ValueError):
    """Replay parameters that make no sense (named in the message)."""


@dataclass(frozen=True)
class ReplayConfig:
    """Cluster shape, policy and the knobs of the replay (times in seconds)."""

    gpus: int
    gpus_per_node: int = 8
    policy: str = "fairshare"
    window_seconds: float = 7 * 86400.0
    contract: ContractRule = field(default_factory=ContractRule)
    checkpoint_interval: float = 1800.0
    restart_overhead: float = 300.0
    cycle_interval: float = 60.0
    max_cycle_interval: float = 960.0  # back-off bound for fruitless periodic cycles
    wake_at_min_runtime: bool = True  # run a cycle the moment a run becomes preemptible
    record_runs: bool = True
    # False: the engine recomputes every cycle what it otherwise keeps between cycles (the
    # reference its shortcuts are checked against: same decisions, about twice as slow).
    incremental: bool = True
    # Stop at this virtual time (None: when every job has finished): the result is the state
    # as of then — running jobs keep ``run_start``, pending ones ``first_start`` None or an
    # open requeue — as a history that a live cluster continues from needs it.
    until: float | None = None

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first bad value."""
        if self.gpus_per_node < 1:
            raise ConfigError(f"GPUs per node must be at least 1, not {self.gpus_per_node}")
        if self.gpus < 1:
            raise ConfigError(f"the cluster needs at least 1 GPU, not {self.gpus}")
        if self.gpus % self.gpus_per_node:
            raise ConfigError(
                f"{self.gpus} GPUs is not a whole number of {self.gpus_per_node}-GPU nodes"
            )
        for name in ("window_seconds", "checkpoint_interval", "cycle_interval"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.max_cycle_interval < self.cycle_interval:
            raise ConfigError("max_cycle_interval must be at least cycle_interval")
        if self.restart_overhead < 0:
            raise ConfigError(f"restart_overhead must be ≥ 0, not {self.restart_overhead}")
        if self.contract.max_min_runtime < 0:
            raise ConfigError("the minimum-runtime cap must be ≥ 0")

    @property
    def nodes(self) -> int:
        """Number of nodes in the simulated cluster."""
        return self.gpus // self.gpus_per_node


@dataclass(slots=True)
class JobRecord:
    """One replayed job: its contract, and what happened to it."""

    id: str
    project: str
    gpus: int
    nodes: int
    submit: float
    duration: float
    min_runtime: float
    resumable: bool
    debug: bool
    remaining: float = 0.0  # work left, including restart overhead owed
    first_start: float | None = None
    end: float | None = None
    preemptions: int = 0
    lost_gpu_seconds: float = 0.0
    # Every wait after a preemption: (requeued at, started again at or None while waiting).
    requeues: list[tuple[float, float | None]] = field(default_factory=list)
    # The current run, if any.
    run_start: float | None = None
    run_protected_until: float = 0.0  # as the engine set it (churn budget included)
    run_gpus: int = 0
    run_rows: tuple[int, ...] = ()
    gen: int = 0  # bumped on preemption so the old run's pending events are ignored
    utilization: float | None = None  # mean GPU busy fraction from the trace (None: unknown)
    # When the current run became idle (the module's idle rule), or None while it is busy.
    run_idle_from: float | None = None
    # Charged GPU time held idle, one (from, to, GPUs) per run that became idle and ended.
    idle_spans: list[tuple[float, float, int]] = field(default_factory=list)

    @property
    def idle_prone(self) -> bool:
        """True when the trace says this job keeps its GPUs below the idle threshold."""
        return self.utilization is not None and self.utilization < IDLE_UTILIZATION

    @property
    def wait(self) -> float | None:
        """Seconds from submission to first start (None if it never started)."""
        return None if self.first_start is None else self.first_start - self.submit


@dataclass(slots=True)
class Run:
    """One stretch of a job on GPUs: for the timeline and the conservation check."""

    job: int  # index into ReplayResult.jobs
    start: float
    end: float
    protected_until: float  # start + minimum runtime: preemptible after this
    preempted: bool
    gpus: int
    rows: tuple[int, ...]  # GPU rows (node index x GPUs per node + slot)


@dataclass(slots=True)
class PreemptionEvent:
    """A preemption as the replay applied it."""

    time: float
    job: int
    kind: str
    by: str | None
    lost_gpu_seconds: float


@dataclass
class ReplayResult:
    """Everything a replay produced; ``metrics.compute_metrics`` turns it into figures."""

    config: ReplayConfig
    policy: str
    shares: dict[str, float]  # project -> effective share (fraction of the cluster)
    jobs: list[JobRecord]
    skipped: list[TraceJob]  # asked for more GPUs than the cluster has
    runs: list[Run]
    preemptions: list[PreemptionEvent]
    ledger: UsageLedger
    start_time: float
    last_submit: float
    end_time: float
    wall_seconds: float = 0.0
    cycles: int = 0
    tick_cycles: int = 0  # cycles run only because time passed (no event)
    duplicates: int = 0

    @property
    def projects(self) -> list[str]:
        """Every project of the trace (budgeted or not), sorted."""
        return self.ledger.projects


SchedulerFactory = Callable[..., object]


def _engine_scheduler(nodes, budget_root, policy: str, params, incremental: bool = True):
    from scheduler.engine import Scheduler, make_policy

    return Scheduler(
        nodes, budget_root, policy=make_policy(policy), params=params, incremental=incremental
    )


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


def replay(
    trace: Trace,
    budgets: Budget | None,
    config: ReplayConfig,
    *,
    scheduler_factory: SchedulerFactory | None = None,
    budget_changes: Sequence[tuple[float, Budget | None]] = (),
    prior_usage: Mapping[str, Sequence[float]] | None = None,
) -> ReplayResult:
    """Replay ``trace`` (see ``_replay``); the collector's freeze is undone however it ends."""
    try:
        return _replay(
            trace,
            budgets,
            config,
            scheduler_factory=scheduler_factory,
            budget_changes=budget_changes,
            prior_usage=prior_usage,
        )
    finally:
        gc.unfreeze()


def _replay(
    trace: Trace,
    budgets: Budget | None,
    config: ReplayConfig,
    *,
    scheduler_factory: SchedulerFactory | None = None,
    budget_changes: Sequence[tuple[float, Budget | None]] = (),
    prior_usage: Mapping[str, Sequence[float]] | None = None,
) -> ReplayResult:
    """Replay ``trace`` on a cluster of ``config.gpus`` GPUs under ``config.policy``.

    Jobs asking for more GPUs than the cluster has are skipped (listed in ``skipped``). The
    replay runs until every job has finished — or until no job can ever start (nothing is
    running, nothing more will arrive and a cycle started nothing); such jobs keep
    ``first_start is None``. ``scheduler_factory(nodes, budget_root, policy, params)`` lets
    tests substitute a scheduler; the default is the real engine. ``budget_changes``: (time,
    tree) pairs, the shares as they changed during the trace (a history replayed as the
    organization lived it); at each time the engine gets the new tree and a cycle runs.
    ``shares`` and the owed figures of the result follow ``budgets``, the tree at the start.
    ``prior_usage``: charged GPU-seconds per project in each hour before the trace's first
    hour (``UsageLedger``'s ``prior``), so the replay starts from a real usage window.
    """
    from scheduler.engine import Node, PolicyParams, Workload
    from scheduler.engine.bursts import BurstRanker

    config.validate()
    wall0 = time.perf_counter()
    contract = config.contract
    gpn = config.gpus_per_node
    jobs: list[JobRecord] = []
    workloads = []
    skipped: list[TraceJob] = []
    # Philly names no submitter: a project's jobs are ranked as one submitter's.
    bursts = BurstRanker(PolicyParams().debug_min_runtime)
    for tj in trace.jobs:
        if tj.gpus > config.gpus:
            skipped.append(tj)
            continue
        rec = JobRecord(
            id=tj.id,
            project=tj.project,
            gpus=tj.gpus,
            nodes=math.ceil(tj.gpus / gpn) if tj.gpus > gpn else 1,
            submit=tj.submit_time,
            duration=tj.duration,
            min_runtime=contract.min_runtime(tj),
            resumable=contract.resumable(tj),
            debug=contract.is_debug(tj),
            remaining=tj.duration,
            utilization=tj.utilization,
        )
        jobs.append(rec)
        rank = bursts.rank(rec.project, tj.submitter, rec.submit, rec.min_runtime)
        workloads.append(
            Workload(
                id=rec.id,
                project=rec.project,
                gpus=rec.gpus,
                submit_time=rec.submit,
                min_runtime=rec.min_runtime,
                resumable=rec.resumable,
                nodes=rec.nodes,
                burst_rank=rank,
            )
        )
    by_id = {rec.id: i for i, rec in enumerate(jobs)}
    # The trace and its records live until the end: kept out of the collector's passes,
    # which would otherwise walk every one of them again and again (decisions unchanged).
    gc.freeze()

    node_names = [f"n{i:03d}" for i in range(config.nodes)]
    node_index = {name: i for i, name in enumerate(node_names)}
    params = PolicyParams(
        window_seconds=config.window_seconds,
        checkpoint_interval=config.checkpoint_interval,
        restart_overhead=config.restart_overhead,
        max_min_runtime=contract.max_min_runtime,
    )
    nodes = [Node(name, gpn) for name in node_names]
    root = to_engine_budget(budgets)
    if scheduler_factory is None:
        sched = _engine_scheduler(nodes, root, config.policy, params, config.incremental)
    else:
        sched = scheduler_factory(nodes, root, config.policy, params)
    ledger = UsageLedger(trace.projects, trace.start, config.window_seconds, prior_usage)
    shares = budgets.effective_shares() if budgets else {}

    # Free GPU slots per node, lowest first, so the timeline can draw one row per GPU.
    free_slots = [list(range(gpn)) for _ in node_names]
    runs: list[Run] = []
    preemptions: list[PreemptionEvent] = []
    heap: list[tuple[float, int, int, int, int]] = []
    seq = 0
    ckpt = config.checkpoint_interval
    overhead = config.restart_overhead
    record_runs = config.record_runs
    interval = config.cycle_interval
    max_gap = config.max_cycle_interval
    gap = interval
    wake = config.wake_at_min_runtime

    def end_run(rec: JobRecord, j: int, t: float, preempted: bool) -> None:
        lane = {"free": rec.run_gpus} if rec.min_runtime <= 0 else {"charged": rec.run_gpus}
        ledger.change(rec.project, t, **{k: -v for k, v in lane.items()})
        for row in rec.run_rows:
            free_slots[row // gpn].append(row % gpn)
        assert rec.run_start is not None  # it ran: set when it started
        if record_runs:
            runs.append(
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

    n = len(jobs)
    submit_i = 0
    changes = sorted(budget_changes, key=lambda c: c[0])
    change_i = 0
    next_tick = math.inf
    cycles = tick_cycles = 0
    now = trace.start
    while True:
        t_submit = jobs[submit_i].submit if submit_i < n else math.inf
        t_event = heap[0][0] if heap else math.inf
        t_change = changes[change_i][0] if change_i < len(changes) else math.inf
        t = min(t_submit, t_event, next_tick, t_change)
        if t == math.inf or (config.until is not None and t > config.until):
            break
        now = t
        ledger.advance(t)

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
                ledger.change(rec.project, t, demand=-rec.gpus)
            end_run(rec, j, t, preempted=False)
            rec.end = t
            rec.remaining = 0.0

        while change_i < len(changes) and changes[change_i][0] <= t:
            sched.set_budget(to_engine_budget(changes[change_i][1]))
            change_i += 1

        while submit_i < n and jobs[submit_i].submit <= t:
            rec = jobs[submit_i]
            sched.submit(workloads[submit_i])
            if rec.min_runtime > 0:
                ledger.change(rec.project, t, demand=rec.gpus)
            submit_i += 1

        if not sched.pending_count():
            next_tick = math.inf
            continue
        result = sched.cycle(t, ledger.usage(t))
        cycles += 1
        tick_only = t == next_tick and t != t_submit and t != t_event
        if tick_only:
            tick_cycles += 1
        if tick_only and not result.starts and not result.preemptions:
            gap = min(gap * 2, max_gap)  # time alone changed nothing: look less often
        else:
            gap = interval

        # Preemptions first: they free the GPU slots the starts of this cycle reuse.
        for order in result.preemptions:
            j = by_id[order.workload_id]
            rec = jobs[j]
            assert rec.run_start is not None  # it runs: set when it started
            ran = t - rec.run_start
            if rec.resumable:
                saved = min(math.floor(ran / ckpt) * ckpt, rec.remaining)
                lost = ran - saved + overhead
                rec.remaining = rec.remaining - saved + overhead
            else:
                lost = ran
                rec.remaining = rec.duration
            lost_gpu_seconds = lost * rec.run_gpus
            rec.lost_gpu_seconds += lost_gpu_seconds
            rec.preemptions += 1
            rec.gen += 1
            preemptions.append(PreemptionEvent(t, j, order.kind, order.by, lost_gpu_seconds))
            end_run(rec, j, t, preempted=True)
            rec.requeues.append((t, None))

        for order in result.starts:
            j = by_id[order.workload_id]
            rec = jobs[j]
            if rec.first_start is None:
                rec.first_start = t
            elif rec.requeues and rec.requeues[-1][1] is None:
                rec.requeues[-1] = (rec.requeues[-1][0], t)
            gpus = 0
            rows: list[int] = []
            for name, count in order.placement.items():
                i = node_index[name]
                slots = free_slots[i]
                if count > len(slots):
                    raise RuntimeError(
                        f"engine placed {count} GPUs of {rec.id} on {name}, "
                        f"which has {len(slots)} free"
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
                ledger.change(rec.project, t, free=gpus)
            else:
                ledger.change(rec.project, t, charged=gpus)
            seq += 1
            heapq.heappush(heap, (t + rec.remaining, _FINISH, seq, j, rec.gen))
            if wake and t < rec.run_protected_until < t + rec.remaining:
                seq += 1
                heapq.heappush(heap, (rec.run_protected_until, _EXPIRY, seq, j, rec.gen))
            if rec.idle_prone:
                idle_at = max(rec.run_protected_until, t + IDLE_AFTER)
                if idle_at < t + rec.remaining:  # it ends before: never idle
                    seq += 1
                    heapq.heappush(heap, (idle_at, _IDLE, seq, j, rec.gen))

        if sched.pending_count():
            if (
                not heap
                and submit_i == n
                and change_i == len(changes)
                and not result.starts
                and not sched.running
            ):
                break  # the cluster is empty and nothing more can start: those jobs never run
            next_tick = t + gap
        else:
            next_tick = math.inf

    ledger.close(now)
    end_time = max(
        [trace.start] + [r.end for r in jobs if r.end is not None] + [p.time for p in preemptions]
    )
    return ReplayResult(
        config=config,
        policy=config.policy,
        shares=shares,
        jobs=jobs,
        skipped=skipped,
        runs=runs,
        preemptions=preemptions,
        ledger=ledger,
        start_time=trace.start,
        last_submit=trace.last_submit,
        end_time=end_time,
        wall_seconds=time.perf_counter() - wall0,
        cycles=cycles,
        tick_cycles=tick_cycles,
        duplicates=trace.duplicates,
    )
