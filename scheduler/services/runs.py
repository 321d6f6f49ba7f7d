"""How runs stop and end: stop requests (orders to agents) and the end of a run.

Lock order, everywhere a run can end: the cluster's accounting lock, then the workload row,
then the run row, then orders. The scheduling cycle also locks workloads before runs.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduler.choices import (
    OPEN_ORDER_STATES,
    OrderKind,
    OrderState,
    RunEndReason,
    WorkloadState,
)
from scheduler.models import Node, Order, Run, RunNode, Workload
from scheduler.selectors.workloads import run_stop_shown
from scheduler.services.locks import ACCOUNTING_LOCK, locked_transaction
from scheduler.services.run_notices import run_ended_notify
from scheduler.services.usage import run_account

# End reasons after which the workload goes back to the queue (submit time kept).
REQUEUE_REASONS = (RunEndReason.PREEMPTED, RunEndReason.DRAINED, RunEndReason.NODE_DOWN)


def order_key(kind: str, run_id: int, node_id: int) -> str:
    """The idempotency key of an order: one start and one stop per run and node, ever."""
    return f"{kind}:{run_id}:{node_id}"


def stop_order(*, run: Run, node_id: int, reason: str, now: datetime) -> Order:
    """An unsaved stop order for ``run`` on one node."""
    return Order(
        kind=OrderKind.STOP,
        cluster_id=run.cluster_id,
        node_id=node_id,
        run_id=run.id,
        idempotency_key=order_key(OrderKind.STOP, run.id, node_id),
        payload={
            "workload": run.workload_id,
            "run": run.id,
            "reason": reason,
            "grace_seconds": settings.SCHEDULER_STOP_GRACE_SECONDS,
        },
        created_at=now,
    )


def cycle_enqueue(*, cluster_id: int) -> None:
    """Run a scheduling cycle for the cluster once the current transaction commits.

    Coalesced: no task is sent while one is already queued for the cluster (it has not
    started, so it will read this commit's changes) — see ``cycle_queue``.
    """
    from scheduler.services.cycle_queue import cycle_send

    # Robust: with the broker away the commit still stands; the beat's next cycle (every
    # SCHEDULER_CYCLE_SECONDS) does the same work.
    transaction.on_commit(lambda: cycle_send(cluster_id=cluster_id), robust=True)


def run_request_stop(
    *,
    run: Run,
    reason: str,
    explanation: str = "",
    preempted_by: Workload | None = None,
    now: datetime | None = None,
) -> Run:
    """Ask the agents of ``run``'s nodes to stop it; the run ends when they confirm.

    Idempotent: a run whose stop was already requested keeps its first reason. The caller
    holds the workload's row lock (and moves the workload to ``preempted``/``cancelled``).
    """
    now = now or timezone.now()
    updated = Run.objects.filter(
        pk=run.pk, ended_at__isnull=True, stop_requested_at__isnull=True
    ).update(
        stop_requested_at=now,
        stop_reason=reason,
        stop_explanation=explanation,
        preempted_by=preempted_by,
    )
    if updated:
        run.refresh_from_db()
        node_ids = RunNode.objects.filter(run=run).values_list("node_id", flat=True)
        Order.objects.bulk_create(
            [stop_order(run=run, node_id=node_id, reason=reason, now=now) for node_id in node_ids],
            ignore_conflicts=True,
        )
    return run


def run_end(
    *,
    run: Run,
    reason: str,
    now: datetime | None = None,
    exit_code: int | None = None,
    reporting_node: Node | None = None,
    explanation: str = "",
) -> Run:
    """End ``run`` at ``now``: close its ledger, settle its workload and its orders.

    Idempotent (compare-and-set on ``ended_at``): ending an ended run changes nothing.
    The workload becomes succeeded/failed on an exit; goes back to pending (submit time
    kept) after a preemption, a drain or a node going down; stays cancelled if it was.
    Open start orders become void. When ``reporting_node`` is given (an agent reported the
    end on that node, or that node went down), the run's other nodes get stop orders so
    their agents clean up a gang's remaining processes.
    """
    now = now or timezone.now()
    with locked_transaction(ACCOUNTING_LOCK, run.cluster_id, wait=True):
        workload = (
            Workload.objects.select_for_update(of=("self",))
            .select_related("project__program", "cluster", "submitted_by")
            .get(pk=run.workload_id)
        )
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.ended_at is not None:
            return run
        # Never end before what the ledger already charged (a late report stamped earlier
        # than the last accounting pass): the ledger must equal GPUs x run time exactly.
        end = max(now, run.started_at, run.accounted_until)
        run.ended_at = end
        run.end_reason = reason
        run.exit_code = exit_code
        run_account(run=run, now=end)
        run.save(update_fields=["ended_at", "end_reason", "exit_code"])

        _settle_orders(run=run, reason=reason, reporting_node=reporting_node, end=end)
        _settle_workload(
            run=run,
            workload=workload,
            reason=reason,
            exit_code=exit_code,
            explanation=explanation,
            end=end,
        )
        cycle_enqueue(cluster_id=run.cluster_id)
    return run


def _settle_orders(*, run: Run, reason: str, reporting_node: Node | None, end: datetime) -> None:
    """Void the ended run's open orders (with a reporting node: its start orders and those
    on that node), and give the run's other nodes stop orders so their agents clean up a
    gang's remaining processes."""
    orders = list(Order.objects.filter(run=run))
    stops = {o.node_id: o for o in orders if o.kind == OrderKind.STOP}
    void = [
        o.id
        for o in orders
        if o.state in OPEN_ORDER_STATES
        and (o.kind == OrderKind.START or reporting_node is None or o.node_id == reporting_node.id)
    ]
    Order.objects.filter(id__in=void).update(state=OrderState.VOID)
    if reporting_node is not None:
        cleanup = reason if reason in REQUEUE_REASONS else "gang_exit"
        others = RunNode.objects.filter(run=run).exclude(node=reporting_node)
        Order.objects.bulk_create(
            [
                stop_order(run=run, node_id=node_id, reason=cleanup, now=end)
                for node_id in others.values_list("node_id", flat=True)
                if node_id not in stops
            ]
        )


def _settle_workload(
    *,
    run: Run,
    workload: Workload,
    reason: str,
    exit_code: int | None,
    explanation: str,
    end: datetime,
) -> None:
    """Move the ended run's workload on: succeeded or failed on an exit, back to pending
    after a preemption, a drain or a node going down, finished if it was cancelled; tell
    its people when it finished, failed or is queued again."""
    fields = ["state", "state_changed_at"]
    active = workload.state in (WorkloadState.RUNNING, WorkloadState.PREEMPTED)
    if reason in (RunEndReason.SUCCEEDED, RunEndReason.FAILED) and active:
        workload.state = reason
        workload.finished_at = end
        workload.exit_code = exit_code
        fields += ["finished_at", "exit_code", *workload.reason_set("")]
    elif reason in REQUEUE_REASONS and active:
        workload.state = WorkloadState.PENDING
        workload.queue_key = None
        # Read by everyone who sees this workload: another project's name is not theirs.
        text = explanation or run_stop_shown(None, run)[1] or RunEndReason(reason).label
        fields += ["queue_key", *workload.reason_set(f"Requeued ({text}).")]
    elif workload.state == WorkloadState.CANCELLED and workload.finished_at is None:
        workload.finished_at = end
        fields = ["finished_at"]
    else:
        fields = []
    if fields:
        if "state_changed_at" in fields:
            workload.state_changed_at = end
        workload.save(update_fields=fields)
    if "state_changed_at" in fields:  # the workload finished, failed or is queued again
        run_ended_notify(run=run, workload=workload, reason=reason, now=end)
