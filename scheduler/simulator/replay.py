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
import math
import time
from collections.abc import Callable, Mapping, Sequence

from scheduler.simulator.budgets import Budget
from scheduler.simulator.ledger import UsageLedger
from scheduler.simulator.replay_loop import AdmittedJobs, Cluster, EventLoop, to_engine_budget
from scheduler.simulator.replay_records import (
    IDLE_AFTER,
    IDLE_UTILIZATION,
    ConfigError,
    JobRecord,
    ReplayConfig,
    ReplayResult,
)
from scheduler.simulator.traces import Trace, TraceJob

# The records live in ``replay_records``, the event loop in ``replay_loop``; callers import
# these names from here.
__all__ = [
    "IDLE_AFTER",
    "IDLE_UTILIZATION",
    "ConfigError",
    "ReplayConfig",
    "ReplayResult",
    "replay",
    "to_engine_budget",
]

SchedulerFactory = Callable[..., object]


def _engine_scheduler(nodes, budget_root, policy: str, params, incremental: bool = True):
    from scheduler.engine import Scheduler, make_policy

    return Scheduler(
        nodes, budget_root, policy=make_policy(policy), params=params, incremental=incremental
    )


def _admit(trace: Trace, config: ReplayConfig) -> AdmittedJobs:
    """One record and one engine workload per job that fits the cluster, with its contract."""
    from scheduler.engine import PolicyParams, Workload
    from scheduler.engine.bursts import BurstRanker

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
    return AdmittedJobs(jobs, workloads, skipped, by_id)


def _start_cluster(
    config: ReplayConfig, budgets: Budget | None, scheduler_factory: SchedulerFactory | None
) -> Cluster:
    """An empty cluster of ``config.nodes`` nodes under ``budgets`` and ``config.policy``."""
    from scheduler.engine import Node, PolicyParams

    node_names = [f"n{i:03d}" for i in range(config.nodes)]
    node_index = {name: i for i, name in enumerate(node_names)}
    params = PolicyParams(
        window_seconds=config.window_seconds,
        checkpoint_interval=config.checkpoint_interval,
        restart_overhead=config.restart_overhead,
        max_min_runtime=config.contract.max_min_runtime,
    )
    nodes = [Node(name, config.gpus_per_node) for name in node_names]
    root = to_engine_budget(budgets)
    if scheduler_factory is None:
        sched = _engine_scheduler(nodes, root, config.policy, params, config.incremental)
    else:
        sched = scheduler_factory(nodes, root, config.policy, params)
    return Cluster(sched, node_index)


def replay(
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
    The collector's freeze is undone however it ends.
    """
    try:
        config.validate()
        wall0 = time.perf_counter()
        admitted = _admit(trace, config)
        # The trace and its records live until the end: kept out of the collector's passes,
        # which would otherwise walk every one of them again and again (decisions unchanged).
        gc.freeze()
        cluster = _start_cluster(config, budgets, scheduler_factory)
        ledger = UsageLedger(trace.projects, trace.start, config.window_seconds, prior_usage)
        shares = budgets.effective_shares() if budgets else {}
        changes = sorted(budget_changes, key=lambda c: c[0])
        loop = EventLoop(config, admitted, cluster, ledger, changes)
        now = loop.run(trace.start)

        ledger.close(now)
        jobs = admitted.jobs
        preemptions = loop.preemptions
        end_time = max(
            [trace.start]
            + [r.end for r in jobs if r.end is not None]
            + [p.time for p in preemptions]
        )
        return ReplayResult(
            config=config,
            policy=config.policy,
            shares=shares,
            jobs=jobs,
            skipped=admitted.skipped,
            runs=loop.runs,
            preemptions=preemptions,
            ledger=ledger,
            start_time=trace.start,
            last_submit=trace.last_submit,
            end_time=end_time,
            wall_seconds=time.perf_counter() - wall0,
            cycles=loop.cycles,
            tick_cycles=loop.tick_cycles,
            duplicates=trace.duplicates,
        )
    finally:
        gc.unfreeze()
