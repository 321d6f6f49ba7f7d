"""What a scheduling cycle reads of a cluster, and the engine built from it.

The live cycle, the kept engine (``cycle_kept``) and the estimated-start selector read the
cluster through these functions, so all of them see it the same way: nodes, the live
workloads (pending, running, stopping after a preemption) with what the engine remembered
of each, their open runs, the budget tree as of now and charged usage over the window.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from governance.models import Cluster
from scheduler import engine
from scheduler.choices import NodeState, RunEndReason, WorkloadState
from scheduler.models import Node, Run, Workload
from scheduler.selectors.budget import ClusterBudget, cluster_budget
from scheduler.selectors.usage import usage_window_by_project

#: The workload states a cycle holds: waiting, running, or stopping after a preemption.
LIVE_STATES = (WorkloadState.PENDING, WorkloadState.RUNNING, WorkloadState.PREEMPTED)

# (id, name, GPUs, state)
NodeRow = tuple[int, str, int, str]
# (run id, workload id, placement, started at, stop requested at, loan for, idle since)
OpenRun = tuple[int, int, dict, datetime, datetime | None, int | None, datetime | None]


@dataclass
class WorkloadRow:
    """One live workload as a cycle reads it."""

    id: int
    project_id: int
    gpus: int
    nodes: int
    min_runtime_seconds: int
    resumable: bool
    priority: int
    submitted_at: datetime
    state: str
    engine_reason: str
    reason_follows_standing: bool
    queue_key: int | None
    state_changed_at: datetime | None
    blocked_since: datetime | None
    patient_until: datetime | None
    burst_rank: int
    preemptions: int = 0
    swapped_for: int | None = None


_ROW_FIELDS = (
    "id",
    "project_id",
    "gpus",
    "nodes",
    "min_runtime_seconds",
    "resumable",
    "priority",
    "submitted_at",
    "state",
    "engine_reason",
    "reason_follows_standing",
    "queue_key",
    "state_changed_at",
    "blocked_since",
    "patient_until",
    "burst_rank",
)


@dataclass
class CycleState:
    """What a cycle knows of the cluster's records: nodes, live workloads, open runs (one
    per workload at most: a database constraint), and the projects' standings as last
    written (project id -> phrase; ``cycle_reasons.standings_write``)."""

    nodes: list[NodeRow]
    workloads: dict[int, WorkloadRow]
    open_runs: dict[int, OpenRun]
    node_ids: dict[str, int] = field(default_factory=dict)
    standings: dict[int, str] = field(default_factory=dict)


def cycle_nodes_read(cluster: Cluster) -> list[NodeRow]:
    """The cluster's nodes by name: (id, name, GPUs, state)."""
    return list(
        Node.objects.filter(cluster=cluster)
        .order_by("name")
        .values_list("id", "name", "gpus", "state")
    )


def cycle_state_read(cluster: Cluster) -> CycleState:
    """Read what a cycle needs of ``cluster`` from the database in a few queries."""
    nodes = cycle_nodes_read(cluster)
    return CycleState(
        nodes=nodes,
        workloads=workload_rows_read(cluster),
        open_runs=open_runs_read(cluster),
        node_ids={name: node_id for node_id, name, _, _ in nodes},
    )


def workload_rows_read(
    cluster: Cluster, ids: Collection[int] | None = None
) -> dict[int, WorkloadRow]:
    """The live workloads of ``cluster`` (only those of ``ids`` when given), by id, with how
    often each was preempted and whether it is swapped out (``_runs_read_into``).

    Two queries. Given ``ids`` (a cycle reading what changed), both look workloads and runs
    up by id alone and the cluster and state are checked here, so the plan never depends on
    the planner knowing how few they are."""
    if ids is None:
        query = Workload.objects.filter(cluster=cluster, state__in=LIVE_STATES)
        runs = Run.objects.filter(cluster=cluster, workload__state__in=LIVE_STATES)
    else:
        query = Workload.objects.filter(id__in=ids)
        runs = Run.objects.filter(workload_id__in=ids)
    state_at = 1 + _ROW_FIELDS.index("state")
    workloads = {
        row[1]: WorkloadRow(*row[1:])
        for row in query.order_by().values_list("cluster_id", *_ROW_FIELDS)
        if row[0] == cluster.id and row[state_at] in LIVE_STATES
    }
    if workloads:
        _runs_read_into(workloads, runs.order_by().values_list(*_RUN_FACTS))
    return workloads


# What the rows need of their workloads' runs (every run, ended or not).
_RUN_FACTS = (
    "workload_id",
    "attempt",
    "end_reason",
    "ended_at",
    "stop_requested_at",
    "preempted_by_id",
    "preempted_by__project_id",
)


def _runs_read_into(workloads: dict[int, WorkloadRow], runs) -> None:
    """Set, from all runs of ``workloads``, how often each pending or running one was
    preempted (its next run is protected longer: the engine's churn budget, so a rebuilt
    engine must know it) and ``swapped_for`` (``engine.Workload.swapped_for``) on:

    - each pending workload whose last run was preempted by a workload of its own project
      (a swap; a later run ended it);
    - each workload whose run is still stopping after such a swap (it waits in state
      preempted for the executor to confirm; the engine counts it too: ``add_stopping``).
    """
    last_attempt: dict[int, int] = {}
    swaps: dict[int, tuple[int, int]] = {}  # workload -> (attempt, preempted by)
    counted = (WorkloadState.PENDING, WorkloadState.RUNNING)
    for workload_id, attempt, end_reason, ended_at, stop_requested_at, by, by_project in runs:
        row = workloads.get(workload_id)
        if row is None:
            continue
        last_attempt[workload_id] = max(attempt, last_attempt.get(workload_id, 0))
        own = by is not None and by_project == row.project_id
        if end_reason == RunEndReason.PREEMPTED:
            if row.state in counted:
                row.preemptions += 1
            later = attempt > swaps.get(workload_id, (0, 0))[0]
            if own and row.state == WorkloadState.PENDING and later:
                swaps[workload_id] = (attempt, by)
        elif own and ended_at is None and stop_requested_at is not None:
            stopping = row.state == WorkloadState.PREEMPTED  # still stopping after a swap
            row.swapped_for = by if stopping else row.swapped_for
    for workload_id, (attempt, by) in swaps.items():
        if last_attempt[workload_id] == attempt:
            workloads[workload_id].swapped_for = by


def open_runs_read(
    cluster: Cluster, workload_ids: Collection[int] | None = None
) -> dict[int, OpenRun]:
    """The open runs of ``cluster`` (of ``workload_ids`` only, when given) by workload id."""
    if workload_ids is None:
        runs = Run.objects.filter(cluster=cluster, ended_at__isnull=True)
    else:
        runs = Run.objects.filter(workload_id__in=workload_ids, ended_at__isnull=True)
    return {
        run[1]: run
        for run in runs.order_by().values_list(
            "id",
            "workload_id",
            "placement",
            "started_at",
            "stop_requested_at",
            "loan_for_id",
            "idle_since",
        )
    }


def engine_workload(row: WorkloadRow, project_key: str) -> engine.Workload:
    """The engine's view of a workload row, with what the engine remembered of it last cycle
    (preemptions, when it last became pending, how long it has waited blocked, when its
    break-even patience ends) and its place in its submitter's burst."""
    queued_at = None
    if row.state == WorkloadState.PENDING and row.state_changed_at is not None:
        queued_at = max(row.state_changed_at, row.submitted_at).timestamp()
    return engine.Workload(
        id=str(row.id),
        project=project_key,
        gpus=row.gpus,
        submit_time=row.submitted_at.timestamp(),
        min_runtime=float(row.min_runtime_seconds),
        resumable=row.resumable,
        priority=row.priority,
        nodes=row.nodes,
        preemptions=row.preemptions,
        queued_at=queued_at,
        blocked_since=None if row.blocked_since is None else row.blocked_since.timestamp(),
        patient_until=None if row.patient_until is None else row.patient_until.timestamp(),
        burst_rank=row.burst_rank,
        swapped_for=None if row.swapped_for is None else str(row.swapped_for),
    )


def _runs_on_engine(row: WorkloadRow, run: OpenRun | None) -> bool:
    """Does the engine count ``row`` as running? Only with an open run no stop was ordered
    for: a stopping run's GPUs already went to the preemptor (or to nobody, on a draining
    node), and its workload waits, in state preempted, until the agent confirms the stop."""
    return run is not None and run[4] is None and row.state == WorkloadState.RUNNING


def workloads_record(
    sched: engine.Scheduler,
    rows: dict[int, WorkloadRow],
    runs: dict[int, OpenRun],
    budget: ClusterBudget,
    *,
    running: bool,
) -> None:
    """Record in ``sched``, in id order, the workloads of ``rows`` the engine counts as
    running (``running=True``: where their open run runs) or the others (pending, or
    stopping after a swap), as the cycle's records have them. A rebuild records the running
    ones first, so every other workload meets the cluster as it is."""
    for workload_id, row in sorted(rows.items()):
        run = runs.get(workload_id)
        if _runs_on_engine(row, run) != running:
            continue
        work = engine_workload(row, budget.key(row.project_id))
        if running:
            assert run is not None
            _, _, placement, started_at, _, loan_for, idle_since = run
            sched.add_running(
                work,
                placement,
                started_at.timestamp(),
                loan_for=None if loan_for is None else str(loan_for),
                # Marked by the idle rule: among the victims the policy allows, it goes first.
                idle=idle_since is not None,
            )
        elif row.state == WorkloadState.PENDING:
            sched.submit(work)
        elif row.state == WorkloadState.PREEMPTED and row.swapped_for is not None:
            sched.add_stopping(work)


def cycle_usage_read(cluster: Cluster, budget: ClusterBudget, now: datetime) -> dict[str, float]:
    """Charged GPU-seconds per engine project over the sliding window ending at ``now``."""
    window = float(settings.SCHEDULER_WINDOW_SECONDS)
    return {
        budget.key(project_id): gpu_seconds
        for project_id, gpu_seconds in usage_window_by_project(
            cluster=cluster, now=now, window_seconds=window
        ).items()
    }


def cycle_engine_build(state: CycleState, budget: ClusterBudget, policy: str) -> engine.Scheduler:
    """A new engine holding ``state``: its nodes and their states, the running work where it
    runs, then the pending and stopping work."""
    window = float(settings.SCHEDULER_WINDOW_SECONDS)
    # Nodes enter healthy and get their state after the running runs are placed: the engine
    # tracks draining and down nodes through ``set_node_state`` (which checks their runs).
    sched = engine.Scheduler(
        [engine.Node(name, gpus) for _, name, gpus, _ in state.nodes],
        budget.root,
        policy=engine.make_policy(policy),
        params=engine.PolicyParams(window_seconds=window),
    )
    workloads_record(sched, state.workloads, state.open_runs, budget, running=True)
    for _, name, _, node_state in state.nodes:
        if node_state != NodeState.HEALTHY:
            sched.set_node_state(name, engine.NodeState(node_state))
    workloads_record(sched, state.workloads, state.open_runs, budget, running=False)
    return sched


def cycle_scheduler_build(cluster: Cluster, state: CycleState, now: datetime, policy: str):
    """Build the engine's ``Scheduler`` from ``state``; return it, the window usage and running.

    The live cycle and the estimated-start selector call this one function, so an estimate
    starts from exactly the state the next cycle will see.
    """
    budget = cluster_budget(cluster=cluster, at=now)
    sched = cycle_engine_build(state, budget, policy)
    return sched, cycle_usage_read(cluster, budget, now), len(sched.running)
