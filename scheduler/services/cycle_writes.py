"""What a scheduling cycle writes of the engine's decisions: runs, run nodes and start orders
for starts, stop requests and stop orders for preemptions and drain evictions, drained nodes,
and (through ``cycle_reasons``) the reason and queue key of every pending workload.

Workload state changes are compare-and-set: row locks on the workloads still in the state the
cycle read."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db.models import Value
from django.db.models.functions import Coalesce

from governance.models import Cluster
from scheduler.choices import NodeState, OrderKind, RunEndReason, RunLane, WorkloadState
from scheduler.models import Node, Order, Run, RunNode, Workload
from scheduler.selectors.budget import ClusterBudget
from scheduler.services.cycle_reasons import (
    Reasons,
    ReasonWrite,
    pending_reasons_write,
    standings_write,
)
from scheduler.services.cycle_state import CycleState, WorkloadRow
from scheduler.services.node_notices import node_changed_notify
from scheduler.services.run_notices import runs_started_notify
from scheduler.services.runs import order_key, stop_order

# One logger for everything a cycle does, whichever module of it writes the line.
logger = logging.getLogger("scheduler.services.cycle")


class _Written(NamedTuple):
    """The runs a step started or told to stop, and the orders for their agents."""

    runs: list[Run]
    orders: list[Order]


def _instant(engine_time: float | None, now: datetime) -> datetime | None:
    """An engine time (seconds since the epoch, the cycle's clock) as an aware datetime; the
    engine's clock is ``now``'s, so the difference is carried over exactly."""
    if not engine_time:
        return None
    return now + timedelta(seconds=engine_time - now.timestamp())


@dataclass(frozen=True)
class AppliedDecisions:
    """What a cycle wrote: runs started, runs told to stop, orders created, nodes drained."""

    starts: int
    preemptions: int
    orders: int
    drained: list[str]


def cycle_decisions_write(
    cluster: Cluster, state: CycleState, result, budget: ClusterBudget, now: datetime
) -> AppliedDecisions:
    """Write the engine's decisions: starts, then stops, their orders, drained nodes, where
    each project stands, and the reason and place in the queue of every workload whose ones
    changed."""
    reasons: Reasons = {}
    runs, start_orders = _write_starts(cluster, state, result, now, reasons)
    stopping, stop_orders = _write_stops(cluster, state, result, now, reasons)
    Order.objects.bulk_create(start_orders + stop_orders)
    drained = _write_drained(cluster, state, runs, now)
    standings = standings_write(cluster, state, result, budget, now)
    pending_reasons_write(state, result, reasons, standings)
    return AppliedDecisions(
        starts=len(runs),
        preemptions=len(stopping),
        orders=len(start_orders) + len(stop_orders),
        drained=drained,
    )


def _write_starts(
    cluster: Cluster, state: CycleState, result, now: datetime, reasons: Reasons
) -> _Written:
    """Runs, run nodes and start orders for the starts whose workload is still pending (the
    row lock is the compare-and-set); the started workloads become running."""
    orders: list[Order] = []
    wanted = {int(s.workload_id): s for s in result.starts}
    # The rows still pending, locked, with what the agents need to launch them (read only
    # for the workloads that start).
    specs = {
        wid: (spec, declared)
        for wid, spec, declared in Workload.objects.select_for_update()
        .filter(id__in=wanted, state=WorkloadState.PENDING)
        .order_by()
        .values_list("id", "launch_spec", "declared_duration_seconds")
    }
    startable = set(specs)
    if len(startable) < len(wanted):
        logger.info(
            "cycle %s: %d starts skipped (changed meanwhile)",
            cluster.id,
            len(wanted) - len(startable),
        )
    history: dict[int, list[tuple[int, datetime, datetime | None]]] = defaultdict(list)
    for workload_id, attempt, started_at, ended_at in Run.objects.filter(
        workload_id__in=startable
    ).values_list("workload_id", "attempt", "started_at", "ended_at"):
        history[workload_id].append((attempt, started_at, ended_at))
    runs = [
        _new_run(cluster, state.workloads[workload_id], wanted[workload_id], history, now)
        for workload_id in sorted(startable)
    ]
    Run.objects.bulk_create(runs)
    run_nodes: list[RunNode] = []
    for run in runs:
        row = state.workloads[run.workload_id]
        launch_spec, declared = specs[run.workload_id]
        remaining = _remaining_seconds(declared, row.resumable, history.get(run.workload_id, []))
        for node_name, gpus in run.placement.items():
            node_id = state.node_ids[node_name]
            run_nodes.append(RunNode(run_id=run.id, node_id=node_id, gpus=gpus))
            orders.append(
                Order(
                    kind=OrderKind.START,
                    cluster_id=cluster.id,
                    node_id=node_id,
                    run_id=run.id,
                    idempotency_key=order_key(OrderKind.START, run.id, node_id),
                    payload={
                        "workload": run.workload_id,
                        "run": run.id,
                        "attempt": run.attempt,
                        "gpus": gpus,
                        "gang_nodes": sorted(run.placement),
                        "launch_spec": launch_spec,
                        "resumable": row.resumable,
                        "declared_duration_seconds": declared,
                        "remaining_seconds": remaining,
                    },
                    created_at=now,
                )
            )
        reasons[run.workload_id] = ReasonWrite(
            WorkloadState.RUNNING,
            wanted[run.workload_id].reason,
            None,
            None,
            None,
        )
    RunNode.objects.bulk_create(run_nodes)
    Workload.objects.filter(id__in=startable).update(
        state=WorkloadState.RUNNING,
        state_changed_at=now,
        first_started_at=Coalesce("first_started_at", Value(now)),
    )
    if startable:
        runs_started_notify(workload_ids=startable, now=now)
    return _Written(runs, orders)


def _new_run(cluster: Cluster, row: WorkloadRow, start, history, now: datetime) -> Run:
    """The run the engine's ``start`` makes of a pending workload: the next attempt, its
    lane, placement and the protection the engine gave it."""
    past = history.get(row.id, [])
    return Run(
        workload_id=row.id,
        attempt=max((a for a, _, _ in past), default=0) + 1,
        project_id=row.project_id,
        cluster_id=cluster.id,
        gpus=row.gpus,
        lane=RunLane.FREE if row.min_runtime_seconds == 0 else RunLane.CHARGED,
        placement=dict(start.placement),
        started_at=now,
        start_reason=start.reason,
        protected_until=_instant(start.protected_until, now),
        loan_for_id=None if start.loan_for is None else int(start.loan_for),
        accounted_until=now,
    )


def _remaining_seconds(
    declared: float | None, resumable: bool, past: list[tuple[int, datetime, datetime | None]]
) -> float | None:
    """What is left of a workload's declared duration for its next run: a resumable workload
    keeps the time its ended runs ran; anything else starts over. ``None`` if undeclared."""
    if declared is None:
        return None
    done = sum((e - s).total_seconds() for _, s, e in past if e) if resumable else 0.0
    return max(0.0, declared - done)


def _write_stops(
    cluster: Cluster, state: CycleState, result, now: datetime, reasons: Reasons
) -> _Written:
    """Stop requests and stop orders for preemptions and drain evictions of workloads still
    running; they become preempted until the agent confirms the stop."""
    orders: list[Order] = []
    victims = {int(p.workload_id): p for p in result.preemptions}
    evictable = set(
        Workload.objects.select_for_update()
        .filter(id__in=victims, state=WorkloadState.RUNNING)
        .values_list("id", flat=True)
    )
    open_by_workload = {
        workload_id: run_id
        for run_id, workload_id, _, _, stop_requested_at, *_ in state.open_runs.values()
        if stop_requested_at is None
    }
    stopping = []
    for workload_id in sorted(evictable):
        run_id = open_by_workload.get(workload_id)
        if run_id is None:
            continue
        p = victims[workload_id]
        reason = RunEndReason.PREEMPTED if p.kind == "preempt" else RunEndReason.DRAINED
        stopping.append(
            Run(
                id=run_id,
                workload_id=workload_id,
                cluster_id=cluster.id,
                stop_requested_at=now,
                stop_reason=reason,
                stop_explanation=p.reason,
                preempted_by_id=int(p.by) if p.by else None,
            )
        )
        reasons[workload_id] = ReasonWrite(WorkloadState.PREEMPTED, p.reason, None, None, None)
    # The workload row locks above are the compare-and-set: a run that ended or began
    # stopping since the read moved its workload out of ``running`` first.
    Run.objects.bulk_update(
        stopping, ["stop_requested_at", "stop_reason", "stop_explanation", "preempted_by"]
    )
    stop_nodes = RunNode.objects.filter(run_id__in=[r.id for r in stopping]).values_list(
        "run_id", "node_id"
    )
    by_id = {r.id: r for r in stopping}
    for run_id, node_id in stop_nodes:
        orders.append(
            stop_order(
                run=by_id[run_id], node_id=node_id, reason=by_id[run_id].stop_reason, now=now
            )
        )
    Workload.objects.filter(id__in=[r.workload_id for r in stopping]).update(
        state=WorkloadState.PREEMPTED, state_changed_at=now, queue_key=None
    )
    return _Written(stopping, orders)


def _write_drained(
    cluster: Cluster, state: CycleState, runs: list[Run], now: datetime
) -> list[str]:
    """Draining nodes with nothing left on them (stopping runs still count) become drained;
    returns their names."""
    busy = {name for _, _, placement, *_ in state.open_runs.values() for name in placement}
    busy |= {name for run in runs for name in run.placement}
    drained = [
        name for _, name, _, st in state.nodes if st == NodeState.DRAINING and name not in busy
    ]
    if drained:
        finished = list(
            Node.objects.filter(cluster=cluster, name__in=drained, state=NodeState.DRAINING)
        )
        Node.objects.filter(pk__in=[n.pk for n in finished], state=NodeState.DRAINING).update(
            state=NodeState.DRAINED,
            state_reason="Drained: no workload left on the node.",
            state_changed_at=now,
        )
        for node in finished:
            node.cluster = cluster
            node_changed_notify(node=node, went="drained", reason=node.state_reason or "", now=now)
    return drained
