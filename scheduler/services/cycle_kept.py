"""The engine a worker keeps between a cluster's scheduling cycles, brought up to date by
reading only what changed.

Rebuilding the engine from the database reads every live workload and open run of the
cluster each cycle; at 5,000 pending and 2,000 running that is most of a cycle's time. So a
worker process keeps, after each cycle it ran, the engine and the records it was built from,
and its next cycle on the same cluster reads only:

- the workloads noted as changed since (``WorkloadChange``: database triggers write a note
  for every insert, delete, state or shape change of a workload and every start, stop
  request or end of a run; the cycle deletes the notes it read, in its own transaction);
- the nodes and the budget tree, compared with what the engine holds.

The engine forgets each changed workload and records it again as the database now has it
(``Scheduler.forget`` then ``cycle_state.workloads_record``): for that workload, what a
rebuild would do. A node whose state differs is set again; anything else that differs
rebuilds. The kept engine is used only when there is no doubt it matches the database:
the cluster's last cycle is the one this worker recorded (not another worker's, not one that
rolled back), the policy and the usage window are the same, the clock did not go back, the
nodes are the same nodes and the budget tree is the same tree, and it was built less than
``SCHEDULER_REBUILD_SECONDS`` ago. Otherwise — and after a restart — it is built from
scratch, and the notes read then are deleted as well.

A rebuilt and a kept engine take the same decisions: ``tests/scheduler/test_cycle_kept.py``
checks it cycle by cycle on random histories.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from governance.models import Cluster
from scheduler import engine
from scheduler.models import SchedulingCycle, WorkloadChange
from scheduler.selectors.budget import ClusterBudget, cluster_budget
from scheduler.services.cycle_state import (
    CycleState,
    NodeRow,
    cycle_engine_build,
    cycle_nodes_read,
    cycle_state_read,
    open_runs_read,
    workload_rows_read,
    workloads_record,
)

logger = logging.getLogger(__name__)


@dataclass
class KeptEngine:
    """An engine with the records it holds, as one worker keeps it for one cluster."""

    cluster_id: int
    policy: str
    window: float
    sched: engine.Scheduler
    state: CycleState
    budget: ClusterBudget
    built_at: datetime
    now: datetime
    #: the ``SchedulingCycle`` this worker recorded last for the cluster
    cycle_id: int | None = None
    #: how this cycle got it: "kept", or why it was rebuilt
    how: str = ""


_kept: dict[int, KeptEngine] = {}


def kept_engine_take(*, cluster: Cluster, now: datetime, policy: str) -> KeptEngine:
    """The engine for a cycle of ``cluster`` at ``now``: the one this worker kept, brought
    up to date, or a new one built from the database (``KeptEngine.how`` says which).

    Call it under the cluster's cycle lock, inside the cycle's transaction: the change
    notes it deletes come back if the cycle rolls back. The engine is no longer kept once
    taken; ``kept_engine_store`` keeps it again after the cycle.
    """
    kept = _kept.pop(cluster.id, None)
    budget = cluster_budget(cluster=cluster, at=now)
    window = float(settings.SCHEDULER_WINDOW_SECONDS)
    doubt = _doubt(kept, cluster, now, policy, window, budget)
    changed = _changes_take(cluster.id)
    if kept is not None and doubt is None:
        nodes = cycle_nodes_read(cluster)
        doubt = _nodes_differ(kept.state.nodes, nodes)
        if doubt is None:
            _bring_up_to_date(kept, cluster, changed, nodes)
            kept.now = now
            kept.how = "kept"
            return kept
    if kept is not None:
        logger.info("cycle %s: engine rebuilt (%s)", cluster.id, doubt)
    return _built(cluster, now, policy, budget, doubt or "first cycle on this worker")


def kept_engine_rebuild(*, cluster: Cluster, now: datetime, policy: str, why: str) -> KeptEngine:
    """A new engine built from the database, for a cycle that found the one it took in
    doubt only after running it (``why`` says how); the taken one is dropped."""
    logger.warning("cycle %s: engine rebuilt (%s)", cluster.id, why)
    return _built(cluster, now, policy, cluster_budget(cluster=cluster, at=now), why)


def _built(
    cluster: Cluster, now: datetime, policy: str, budget: ClusterBudget, how: str
) -> KeptEngine:
    """An engine and its records read from the database."""
    state = cycle_state_read(cluster)
    return KeptEngine(
        cluster_id=cluster.id,
        policy=policy,
        window=float(settings.SCHEDULER_WINDOW_SECONDS),
        sched=cycle_engine_build(state, budget, policy),
        state=state,
        budget=budget,
        built_at=now,
        now=now,
        how=how,
    )


def kept_engine_store(kept: KeptEngine, cycle_id: int) -> None:
    """Keep ``kept`` for the cluster's next cycle on this worker; ``cycle_id`` is the
    ``SchedulingCycle`` just recorded with it (the next cycle checks it is still the last)."""
    if not settings.SCHEDULER_KEEP_ENGINE:
        return
    kept.cycle_id = cycle_id
    _kept[kept.cluster_id] = kept


def kept_engines_clear() -> None:
    """Forget every kept engine (their next cycles rebuild)."""
    _kept.clear()


def _doubt(
    kept: KeptEngine | None,
    cluster: Cluster,
    now: datetime,
    policy: str,
    window: float,
    budget: ClusterBudget,
) -> str | None:
    """Why ``kept`` cannot be used for a cycle at ``now`` (None: it can)."""
    if not settings.SCHEDULER_KEEP_ENGINE:
        return "keeping the engine is turned off"
    if kept is None:
        return "first cycle on this worker"
    if (kept.policy, kept.window) != (policy, window):
        return "another policy or window"
    if now < kept.now:
        return "the clock went back"
    if now - kept.built_at >= timedelta(seconds=settings.SCHEDULER_REBUILD_SECONDS):
        return "periodic rebuild"
    last = list(
        SchedulingCycle.objects.filter(cluster_id=cluster.id, id__gte=kept.cycle_id or 0)
        .order_by("id")
        .values_list("id", flat=True)[:2]
    )
    if last != [kept.cycle_id]:
        return "another cycle ran since, or the last one did not commit"
    if (budget.root, budget.keys) != (kept.budget.root, kept.budget.keys):
        return "the budget tree changed"
    return None


def _changes_take(cluster_id: int) -> set[int]:
    """Delete the cluster's change notes that are committed now; return their workload ids.

    One statement, so a note committed after it stays for the next cycle (which reads its
    workload again: reading a workload twice is harmless, missing it is not)."""
    table = WorkloadChange._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE cluster_id = %s RETURNING workload_id", [cluster_id]
        )
        return {row[0] for row in cursor.fetchall()}


def _nodes_differ(kept: list[NodeRow], nodes: list[NodeRow]) -> str | None:
    """Why the engine cannot follow the nodes by their states alone (None: it can)."""
    if [n[:3] for n in kept] != [n[:3] for n in nodes]:
        return "nodes were added, removed, renamed or resized"
    return None


def _bring_up_to_date(
    kept: KeptEngine, cluster: Cluster, changed: set[int], nodes: list[NodeRow]
) -> None:
    """Forget each changed workload and record it again as the database has it (running
    ones first, as a rebuild does), then set each node whose state changed."""
    sched, state = kept.sched, kept.state
    if changed:
        rows = workload_rows_read(cluster, changed)
        runs = open_runs_read(cluster, changed)
        for workload_id in changed:
            state.workloads.pop(workload_id, None)
            state.open_runs.pop(workload_id, None)
            sched.forget(str(workload_id))
        state.workloads.update(rows)
        state.open_runs.update(runs)
        workloads_record(sched, rows, runs, kept.budget, running=True)
        workloads_record(sched, rows, runs, kept.budget, running=False)
    for _, name, _, node_state in nodes:
        wanted = engine.NodeState(node_state)
        if sched.node_state(name) != wanted:
            sched.set_node_state(name, wanted)
    state.nodes = nodes
