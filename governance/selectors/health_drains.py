"""Cluster health, the nodes' side: drains in progress and the drains finished in a period.

The models keep no history of node states: drains in progress come from ``Node.state`` and
``Node.state_changed_at``, finished drains from the scheduling cycles that reported them
(``SchedulingCycle.drained_nodes``) with the evictions the drain ordered.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from governance.models import Cluster
from scheduler.choices import NodeState, RunEndReason
from scheduler.models import Node, RunNode, SchedulingCycle
from scheduler.selectors.protection import drain_due_at

# A drain evicts each run once its minimum runtime (at most 8 h) has passed.
MAX_DRAIN = timedelta(hours=8, minutes=30)


@dataclass
class DrainInProgress:
    """A draining node: since when, who asked, why, and the work still on it.

    ``protected_until`` is when the last run on it passes its minimum runtime (capped as the
    engine caps it: ``scheduler.selectors.protection.drain_due_at``) — the latest moment the
    drain evicts it (runs that end earlier leave earlier).
    """

    node: Node
    since: datetime | None
    by: object
    reason: str
    running: int
    gpus_in_use: int
    protected_until: datetime | None


@dataclass
class FinishedDrain:
    """A node that became drained in the period.

    The request time is not recorded (``Node.state_changed_at`` is overwritten when the node
    becomes drained), so ``first_eviction`` — the first stop the drain ordered on the node —
    is the earliest known moment; ``duration`` runs from it to ``drained_at`` (``None`` when
    the node had nothing to evict).
    """

    node_name: str
    drained_at: datetime
    evictions: int
    first_eviction: datetime | None

    @property
    def duration(self) -> timedelta | None:
        """Time from the first eviction to drained (``None`` with no eviction)."""
        if self.first_eviction is None:
            return None
        return self.drained_at - self.first_eviction

    @property
    def duration_label(self) -> str:
        """The duration as "2 h 05 min" (or "45 min"); "—" with no eviction."""
        if self.duration is None:
            return "—"
        minutes = int(self.duration.total_seconds() // 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def drains_in_progress(cluster: Cluster) -> list[DrainInProgress]:
    """Draining nodes with the runs still on them and when the last one may be evicted."""
    draining = list(
        Node.objects.filter(cluster=cluster, state=NodeState.DRAINING)
        .select_related("state_changed_by")
        .order_by("state_changed_at", "name")
    )
    if not draining:
        return []
    on_nodes: dict[int, list[RunNode]] = defaultdict(list)
    for run_node in RunNode.objects.filter(
        node__in=draining, run__ended_at__isnull=True
    ).select_related("run__workload"):
        on_nodes[run_node.node_id].append(run_node)
    drains = []
    for node in draining:
        runs = on_nodes.get(node.id, [])
        ends = [
            due
            for rn in runs
            if (
                due := drain_due_at(
                    started_at=rn.run.started_at,
                    min_runtime_seconds=rn.run.workload.min_runtime_seconds,
                )
            )
            is not None
        ]
        drains.append(
            DrainInProgress(
                node=node,
                since=node.state_changed_at,
                by=node.state_changed_by,
                reason=node.state_reason,
                running=len(runs),
                gpus_in_use=sum(rn.gpus for rn in runs),
                protected_until=max(ends) if ends else None,
            )
        )
    return drains


def finished_drains(cluster: Cluster, start: datetime, end: datetime) -> list[FinishedDrain]:
    """Nodes the scheduling cycles reported drained in ``[start, end)``, newest first."""
    cycles = (
        SchedulingCycle.objects.filter(cluster=cluster, started_at__gte=start, started_at__lt=end)
        .exclude(drained_nodes=[])
        .order_by("started_at")
        .values_list("started_at", "drained_nodes")
    )
    events = [(at, name) for at, names in cycles for name in names]
    if not events:
        return []
    names = {name for _, name in events}
    evictions = defaultdict(list)
    for node_name, stopped_at in (
        RunNode.objects.filter(
            node__cluster=cluster,
            node__name__in=names,
            run__stop_reason=RunEndReason.DRAINED,
            run__stop_requested_at__gte=start - MAX_DRAIN,
            run__stop_requested_at__lt=end,
        )
        .values_list("node__name", "run__stop_requested_at")
        .order_by("run__stop_requested_at")
    ):
        evictions[node_name].append(stopped_at)
    finished = []
    previous: dict[str, datetime] = {}
    for drained_at, name in events:
        since = max(previous.get(name, drained_at - MAX_DRAIN), drained_at - MAX_DRAIN)
        mine = [t for t in evictions.get(name, []) if since < t <= drained_at]
        finished.append(
            FinishedDrain(
                node_name=name,
                drained_at=drained_at,
                evictions=len(mine),
                first_eviction=mine[0] if mine else None,
            )
        )
        previous[name] = drained_at
    finished.reverse()
    return finished
