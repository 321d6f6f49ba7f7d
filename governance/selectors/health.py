"""Cluster health — the metrics pyramid (``docs/design.md``): availability, occupancy, impact per day.

Read from the usage rollups (closed days from the daily cache ``governance.models.UsageDay``,
the rest from the hourly ``scheduler.models.UsageHour``, split by
``governance.selectors.usage_sources.usage_sources``), the share history and the live node states;
no ledger scans. Per UTC day of a period:

- **availability** = healthy GPU-seconds ÷ (GPUs x seconds). The rollups do not store
  healthy GPUs, but accounting wrote ``entitled = effective share x healthy GPUs x seconds``
  for every budgeted project, so healthy GPU-seconds = Σ entitled ÷ Σ effective shares in
  force (from the allocation history; a day when that sum changed is read hour by hour).
  A day with no entitlement at all (nothing budgeted, or accounting not running) is
  *unknown*; otherwise the whole day (from when accounting began, up to how far it got
  today) is measured, so hours when accounting stopped count as unavailable.
- **occupancy** = allocated ÷ healthy GPU-seconds, where allocated = budgeted + burst + free
  (everything that ran), at most 100 %: while a draining node still runs work, that work is
  allocated but the node's capacity no longer counts as healthy, and a day of a drain on a
  full cluster would otherwise read a little over 100 %.
- **impact** = the organization's delivery ratio for that day, Σ over projects of
  min(charged, owed) ÷ Σ owed (owed = Σ over hours of min(entitled, demand)); the stricter
  hourly ratio is given beside it.

These are cluster-wide figures (no team's numbers can be read from them), shown to everyone
who sees the cluster. Node states are the current ones (``Node.state``); the models keep no
history of state changes, so past availability comes from the rollup as above, drains in
progress from ``Node.state_changed_at``, and finished drains from the scheduling cycles that
reported them (``SchedulingCycle.drained_nodes``) with the evictions the drain ordered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Sum
from django.utils import timezone

from governance.models import Cluster
from governance.selectors.health_drains import (
    DrainInProgress,
    FinishedDrain,
    drains_in_progress,
    finished_drains,
)
from governance.selectors.health_pyramid import HealthDay, pyramid_days_kept
from scheduler.choices import NodeState
from scheduler.models import AccountingCursor, Node

__all__ = [  # the day and drain rows are re-exported: callers import them from here
    "ClusterHealth",
    "DrainInProgress",
    "FinishedDrain",
    "HealthDay",
    "NodeStateCount",
    "cluster_health",
]

HOUR = timedelta(hours=1)
NODE_STATE_ORDER = [NodeState.HEALTHY, NodeState.DRAINING, NodeState.DRAINED, NodeState.DOWN]


@dataclass
class NodeStateCount:
    """Nodes and GPUs of the cluster in one state, now."""

    state: str
    label: str
    nodes: int
    gpus: int


@dataclass
class ClusterHealth:
    """Everything the health page shows for one cluster and period."""

    cluster: Cluster
    start: datetime
    end: datetime
    gpus: int
    days: list[HealthDay]
    nodes_by_state: list[NodeStateCount]
    drains_in_progress: list[DrainInProgress]
    finished_drains: list[FinishedDrain] = field(default_factory=list)

    @property
    def totals(self) -> HealthDay:
        """The whole period as one bucket (ratios of the sums, not means of ratios)."""
        total = HealthDay(day=self.start)
        for day in self.days:
            for name in (
                "capacity_gpu_seconds",
                "healthy_gpu_seconds",
                "allocated_gpu_seconds",
                "allocated_known_gpu_seconds",
                "charged_gpu_seconds",
                "free_gpu_seconds",
                "owed_gpu_seconds",
                "owed_delivered_gpu_seconds",
                "hourly_owed_delivered_gpu_seconds",
            ):
                setattr(total, name, getattr(total, name) + getattr(day, name))
            total.known_hours += day.known_hours
        return total

    @property
    def has_usage_data(self) -> bool:
        """Any rollup figure in the period at all."""
        return any(
            d.known_hours or d.allocated_gpu_seconds or d.owed_gpu_seconds for d in self.days
        )


def cluster_health(
    *, visibility, cluster: Cluster, start: datetime, end: datetime, now: datetime | None = None
) -> ClusterHealth:
    """The metrics pyramid of ``cluster`` per UTC day of ``[start, end)``, nodes and drains now.

    The caller resolves ``cluster`` through ``visibility.clusters()`` first (a 404 for a
    cluster the user cannot see); ``visibility`` is checked again here and an invisible
    cluster raises ``PermissionDenied``. ``end`` is clipped to the end of the current hour.
    A fixed number of queries, independent of the number of projects and days.
    """
    from django.core.exceptions import PermissionDenied

    if not visibility.clusters().filter(pk=cluster.pk).exists():
        raise PermissionDenied("You cannot see this cluster.")
    now = now or timezone.now()
    end = min(end, now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + HOUR)
    states = {
        row["state"]: row
        for row in Node.objects.filter(cluster=cluster)
        .values("state")
        .annotate(nodes=Count("id"), gpus=Sum("gpus"))
    }
    node_gpus = sum(row["gpus"] or 0 for row in states.values())
    accounted = (
        AccountingCursor.objects.filter(cluster=cluster)
        .values_list("accounted_from", "accounted_until")
        .first()
    )
    measured_from, accounted_until = accounted or (None, None)
    measured = min(accounted_until or now, now)
    gpus = node_gpus or cluster.total_gpus
    nodes_by_state = [
        NodeStateCount(
            state=state.value,
            label=state.label,
            nodes=states.get(state.value, {}).get("nodes", 0),
            gpus=states.get(state.value, {}).get("gpus", 0) or 0,
        )
        for state in NODE_STATE_ORDER
    ]
    return ClusterHealth(
        cluster=cluster,
        start=start,
        end=end,
        gpus=gpus,
        days=pyramid_days_kept(cluster, start, end, gpus, measured, measured_from)
        if start < end
        else [],
        nodes_by_state=nodes_by_state,
        drains_in_progress=drains_in_progress(cluster),
        finished_drains=finished_drains(cluster, start, end) if start < end else [],
    )
