"""The scheduling loop at a glance: the one line ``manage.py serve`` prints each minute."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count
from django.utils import timezone

from scheduler.choices import NodeState, WorkloadState
from scheduler.models import Node, SchedulingCycle, Workload


@dataclass(frozen=True)
class LoopStatus:
    """Cycles run in the last ``minutes``, workloads running and pending, healthy nodes."""

    at: datetime
    minutes: int
    cycles: int
    running: int
    pending: int
    healthy_nodes: int
    nodes: int

    def line(self, last_error: str = "") -> str:
        """``18:31 UTC · 58 cycles in the last minute · 52 running, 130 pending · …``."""
        per = "minute" if self.minutes == 1 else f"{self.minutes} minutes"
        return (
            f"{self.at:%H:%M} UTC · {self.cycles} cycle{'s' if self.cycles != 1 else ''} in "
            f"the last {per} · {self.running} running, {self.pending} pending · "
            f"{self.healthy_nodes}/{self.nodes} nodes healthy · "
            f"last error: {last_error or 'none'}"
        )


def loop_status(*, now: datetime | None = None, minutes: int = 1) -> LoopStatus:
    """The loop's state over every cluster, now. Three small queries."""
    now = now or timezone.now()
    states = dict(
        Workload.objects.filter(state__in=(WorkloadState.RUNNING, WorkloadState.PENDING))
        .values_list("state")
        .annotate(n=Count("id"))
    )
    nodes = dict(Node.objects.values_list("state").annotate(n=Count("id")))
    return LoopStatus(
        at=now,
        minutes=minutes,
        cycles=SchedulingCycle.objects.filter(
            started_at__gt=now - timedelta(minutes=minutes), started_at__lte=now
        ).count(),
        running=states.get(WorkloadState.RUNNING, 0),
        pending=states.get(WorkloadState.PENDING, 0),
        healthy_nodes=nodes.get(NodeState.HEALTHY, 0),
        nodes=sum(nodes.values()),
    )
