"""A scheduling cycle: read the cluster from the database, run the engine, write its orders.

One cycle at a time per cluster across every worker (a PostgreSQL advisory lock; a cycle
that cannot take it skips — the one holding it is doing the work, and sends one more cycle
after it commits when a cycle skipped meanwhile). Everything a cycle
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
is read every cycle. What the engine decided is written by ``cycle_writes`` (and the pending
workloads' reasons by ``cycle_reasons``).
"""

from __future__ import annotations

import gc
import logging
import time
from collections import Counter
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.models import Cluster
from scheduler.models import SchedulingCycle
from scheduler.services.cycle_kept import (
    KeptEngine,
    kept_engine_rebuild,
    kept_engine_store,
    kept_engine_take,
)
from scheduler.services.cycle_queue import (
    cycle_rerun_clear,
    cycle_rerun_if_requested,
    cycle_rerun_request,
)
from scheduler.services.cycle_state import CycleState, cycle_usage_read
from scheduler.services.cycle_writes import cycle_decisions_write
from scheduler.services.locks import CYCLE_LOCK, locked_transaction

logger = logging.getLogger(__name__)

REASONS_SUMMARY_SIZE = 20


def scheduling_cycle_run(
    *, cluster_id: int, now: datetime | None = None, policy: str | None = None
) -> SchedulingCycle | None:
    """Run one scheduling cycle for the cluster; ``None`` when another one holds the lock.

    ``now`` defaults to the time the lock was taken. The engine's policy is
    ``SCHEDULER_POLICY`` unless ``policy`` names another. A cycle that skips leaves a rerun
    request, so the holder sends the next cycle once it commits (``cycle_queue``).
    """
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    policy = policy or settings.SCHEDULER_POLICY
    record = _run_locked(cluster, now, policy)
    if record is None:
        logger.info("cycle %s skipped: another cycle holds the lock", cluster.id)
        cycle_rerun_request(cluster_id=cluster.id)
        # The holder may have committed and looked for requests between our first try and
        # the request: then the lock is free and this cycle is the one to read the change.
        record = _run_locked(cluster, now, policy)
    return record


def _run_locked(cluster: Cluster, now: datetime | None, policy: str) -> SchedulingCycle | None:
    """One cycle under the cluster's cycle lock, or ``None`` without waiting when it is held."""
    with locked_transaction(CYCLE_LOCK, cluster.id, wait=False) as held:
        if not held:
            return None
        # Before anything is read: this cycle serves every rerun asked for so far, and one
        # asked for from now on is sent after this cycle's commit.
        cycle_rerun_clear(cluster_id=cluster.id)
        transaction.on_commit(lambda: cycle_rerun_if_requested(cluster_id=cluster.id), robust=True)
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


class _Decision(NamedTuple):
    """What the engine decided in a cycle, with its pending and running counts before."""

    pending: int
    running: int
    result: object


def _decide(cluster: Cluster, kept: KeptEngine, now: datetime) -> _Decision:
    """Run ``kept``'s engine at ``now``: pending and running counts before, and its result."""
    sched = kept.sched
    pending, running = sched.pending_count(), len(sched.running)
    usage = cycle_usage_read(cluster, kept.budget, now)
    return _Decision(pending, running, sched.cycle(now.timestamp(), usage, explain=True))


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
    applied = cycle_decisions_write(cluster, kept.state, result, kept.budget, now)
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
