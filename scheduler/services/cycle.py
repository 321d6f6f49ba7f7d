"""A scheduling cycle: read the cluster from the database, run the engine, write its orders.

One cycle at a time per cluster across every worker (a PostgreSQL advisory lock; a cycle
that cannot take it skips — the one holding it is doing the work). Everything a cycle
decides is written in one transaction: runs and start orders for starts, stop orders for
preemptions and drain evictions, drained nodes, the engine's reason and queue key of
every pending workload, and the ``SchedulingCycle`` record. Workload state changes are
compare-and-set (row locks on workloads still in the state the cycle read), so a retried or
overlapping cycle cannot start a workload twice — and the database refuses a second open
run for one workload in any case.

The engine comes from ``cycle_kept``: the one this worker kept after its last cycle of the
cluster, brought up to date with the workloads noted as changed since, or — after a restart,
another worker's cycle, or on any doubt — rebuilt from the database (``cycle_state``: nodes,
open runs, live workloads, the budget tree as of now). Charged usage over the sliding window
is read every cycle.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from governance.models import Cluster
from scheduler.choices import (
    NodeState,
    OrderKind,
    RunEndReason,
    RunLane,
    WorkloadState,
)
from scheduler.models import Node, Order, Run, RunNode, SchedulingCycle, Workload
from scheduler.services.cycle_kept import (
    KeptEngine,
    kept_engine_rebuild,
    kept_engine_store,
    kept_engine_take,
)
from scheduler.services.cycle_state import CycleState, WorkloadRow, cycle_usage_read
from scheduler.services.locks import CYCLE_LOCK, locked_transaction
from scheduler.services.node_notices import node_changed_notify
from scheduler.services.queue_keys import queue_keys_assign
from scheduler.services.run_notices import runs_started_notify
from scheduler.services.runs import order_key, stop_order

logger = logging.getLogger(__name__)

REASONS_SUMMARY_SIZE = 20


def _update_reasons(
    rows: list[tuple[int, str, str | None, int | None, datetime | None, datetime | None]],
) -> None:
    """Write (id, expected state, reason, queue key, blocked since, patient until) to
    workloads still in that state; a reason of None writes the queue key alone.

    One statement on PostgreSQL (``UPDATE … FROM jsonb_to_recordset(…)``): a cycle rewrites
    a few thousand workloads' reasons, and Django's ``bulk_update`` (a CASE per row) is
    quadratic. Rows whose queue key alone changed carry no reason text.
    """
    if not rows:
        return
    if connection.vendor == "postgresql":
        # One JSON parameter: binding thousands of array elements client-side is slower.
        payload = json.dumps(
            [
                {"id": i, "state": st, "key": k}
                if r is None
                else {
                    "id": i,
                    "state": st,
                    "said": True,
                    "reason": r,
                    "key": k,
                    "blocked": None if b is None else b.isoformat(),
                    "patient": None if pu is None else pu.isoformat(),
                }
                for i, st, r, k, b, pu in rows
            ]
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                UPDATE {Workload._meta.db_table} AS w
                   SET queue_key = v.key,
                       engine_reason = CASE WHEN v.said THEN v.reason ELSE w.engine_reason END,
                       blocked_since = CASE WHEN v.said THEN v.blocked ELSE w.blocked_since END,
                       patient_until = CASE WHEN v.said THEN v.patient ELSE w.patient_until END
                  FROM jsonb_to_recordset(%s::jsonb)
                       AS v(id bigint, state text, said boolean, reason text, key bigint,
                            blocked timestamptz, patient timestamptz)
                 WHERE w.id = v.id AND w.state = v.state
                """,
                [payload],
            )
        return
    for workload_id, state, reason, key, blocked, patient in rows:
        fields = {"queue_key": key}
        if reason is not None:
            fields.update(engine_reason=reason, blocked_since=blocked, patient_until=patient)
        Workload.objects.filter(pk=workload_id, state=state).update(**fields)


def _instant(engine_time: float | None, now: datetime) -> datetime | None:
    """An engine time (seconds since the epoch, the cycle's clock) as an aware datetime; the
    engine's clock is ``now``'s, so the difference is carried over exactly."""
    if not engine_time:
        return None
    return now + timedelta(seconds=engine_time - now.timestamp())


# workload id -> (state it must still be in, reason (None: only the queue key changed), queue
# key, blocked since, patient until)
_Reasons = dict[int, tuple[str, str | None, int | None, datetime | None, datetime | None]]


@dataclass(frozen=True)
class _Applied:
    """What a cycle wrote: runs started, runs told to stop, orders created, nodes drained."""

    starts: int
    preemptions: int
    orders: int
    drained: list[str]


def _apply(cluster: Cluster, state: CycleState, result, now: datetime) -> _Applied:
    """Write the engine's decisions: starts, then stops, their orders, drained nodes, and the
    reason and place in the queue of every workload whose ones changed."""
    reasons: _Reasons = {}
    runs, start_orders = _write_starts(cluster, state, result, now, reasons)
    stopping, stop_orders = _write_stops(cluster, state, result, now, reasons)
    Order.objects.bulk_create(start_orders + stop_orders)
    drained = _write_drained(cluster, state, runs, now)
    _write_pending_reasons(state, result, reasons)
    return _Applied(
        starts=len(runs),
        preemptions=len(stopping),
        orders=len(start_orders) + len(stop_orders),
        drained=drained,
    )


def _write_starts(
    cluster: Cluster, state: CycleState, result, now: datetime, reasons: _Reasons
) -> tuple[list[Run], list[Order]]:
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
        reasons[run.workload_id] = (
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
    return runs, orders


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
    cluster: Cluster, state: CycleState, result, now: datetime, reasons: _Reasons
) -> tuple[list[Run], list[Order]]:
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
        reasons[workload_id] = (WorkloadState.PREEMPTED, p.reason, None, None, None)
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
    return stopping, orders


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


def _write_pending_reasons(state: CycleState, result, reasons: _Reasons) -> None:
    """Add every pending workload whose reason, queue key, blocked-since or patience changed
    to ``reasons``, write them all in one statement, and update ``state``'s rows to match (the
    kept records, ``cycle_kept``: the next cycle compares with what was written).

    Queue keys change only where the order did (``queue_keys``): most cycles start a few
    workloads and queue a few new ones, and every other key still sorts right.
    """
    said, blocked_at, patient_at = result.reasons, result.blocked_since, result.patient_until
    pending = WorkloadState.PENDING
    rows = state.workloads
    ordered = []
    for workload_id in map(int, result.order):
        row = rows.get(workload_id)
        if row is not None and row.state == pending and workload_id not in reasons:
            ordered.append(workload_id)
    new_keys = queue_keys_assign(ordered, {w: rows[w].queue_key for w in ordered})
    placed = set(ordered)
    # Thousands of rows a cycle: no call per row but for the few blocked or patient ones.
    for row in rows.values():
        if row.state != pending or row.id in reasons:
            continue
        key = str(row.id)
        reason = said.get(key, "")
        queue_key = new_keys.get(row.id, row.queue_key) if row.id in placed else None
        b, p = blocked_at.get(key), patient_at.get(key)
        blocked = None if b is None else datetime.fromtimestamp(b, tz=UTC)
        patient = None if p is None else datetime.fromtimestamp(p, tz=UTC)
        if (
            reason != row.engine_reason
            or blocked != row.blocked_since
            or patient != row.patient_until
        ):
            reasons[row.id] = (pending, reason, queue_key, blocked, patient)
            row.engine_reason, row.queue_key = reason, queue_key
            row.blocked_since, row.patient_until = blocked, patient
        elif queue_key != row.queue_key:
            reasons[row.id] = (pending, None, queue_key, None, None)
            row.queue_key = queue_key
    _update_reasons([(wid, *values) for wid, values in reasons.items()])


def scheduling_cycle_run(
    *, cluster_id: int, now: datetime | None = None, policy: str | None = None
) -> SchedulingCycle | None:
    """Run one scheduling cycle for the cluster; ``None`` when another one holds the lock.

    ``now`` defaults to the time the lock was taken. The engine's policy is
    ``SCHEDULER_POLICY`` unless ``policy`` names another.
    """
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    policy = policy or settings.SCHEDULER_POLICY
    with locked_transaction(CYCLE_LOCK, cluster.id, wait=False) as held:
        if not held:
            logger.info("cycle %s skipped: another cycle holds the lock", cluster.id)
            return None
        pause = settings.SCHEDULER_CYCLE_PAUSE_SECONDS
        if pause:
            # Fault injection for the failure tests (kill -9 a worker mid-cycle); 0 otherwise.
            time.sleep(pause)
        now = now or timezone.now()
        began = time.perf_counter()
        # A cycle allocates ~10^5 short-lived objects around a large live heap; the cyclic
        # collector's passes over that heap cost more than the cycle's own work.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return _cycle(cluster, now, policy, began)
        finally:
            if collecting:
                gc.enable()


def _decide(cluster: Cluster, kept: KeptEngine, now: datetime) -> tuple[int, int, object]:
    """Run ``kept``'s engine at ``now``: pending and running counts before, and its result."""
    sched = kept.sched
    pending, running = sched.pending_count(), len(sched.running)
    usage = cycle_usage_read(cluster, kept.budget, now)
    return pending, running, sched.cycle(now.timestamp(), usage, explain=True)


def _victims_without_open_run(state: CycleState, result) -> int:
    """How many of the engine's victims have no open run without a stop request in
    ``state`` (the engine's records): each is an eviction the cycle could not write."""
    return sum(
        1
        for p in result.preemptions
        if (run := state.open_runs.get(int(p.workload_id))) is None or run[4] is not None
    )


def _cycle(cluster: Cluster, now: datetime, policy: str, began: float) -> SchedulingCycle:
    """The body of a cycle, run under the cycle lock: take the engine (kept, brought up to
    date, or rebuilt), run it, write what it decided, keep it for the next cycle."""
    kept = kept_engine_take(cluster=cluster, now=now, policy=policy)
    pending, running, result = _decide(cluster, kept, now)
    if kept.how == "kept" and (lacking := _victims_without_open_run(kept.state, result)):
        # The kept records and the engine disagree and no change note says why: nothing of
        # this cycle is written (a start may rely on that stop); decide again from scratch.
        kept = kept_engine_rebuild(
            cluster=cluster,
            now=now,
            policy=policy,
            why=f"{lacking} victim(s) with no open run in the kept records",
        )
        pending, running, result = _decide(cluster, kept, now)
    applied = _apply(cluster, kept.state, result, now)
    summary = Counter(result.reasons.values()).most_common(REASONS_SUMMARY_SIZE)
    record = SchedulingCycle.objects.create(
        cluster=cluster,
        started_at=now,
        duration_seconds=time.perf_counter() - began,
        policy=policy,
        pending=pending,
        running=running,
        starts=applied.starts,
        preemptions=applied.preemptions,
        orders=applied.orders,
        drained_nodes=applied.drained,
        reasons_summary=dict(summary),
        engine=kept.how[:80],
    )
    # Kept at once, not on commit: a cycle that does not commit leaves no record with this
    # id, and the next cycle, finding none, rebuilds (``cycle_kept._doubt``).
    kept_engine_store(kept, record.id)
    return record
