"""What the home page shows each role first: the answer to the question that role opens
the product with.

- researchers and PIs: their queue (waiting, running, GPUs held) and how to submit;
- PIs and program managers: what their projects or programs were owed and delivered this
  week, day by day;
- finance: last month's GPU-hours and cost, with the downloads;
- org admins (the operators): the nodes that need attention.

Every figure comes from the selectors the dashboards and reports use, so the home page never
disagrees with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.db.models import Count, Q, Sum

from governance.models import Cluster, Program, Project
from governance.selectors.reports import report_period_of_month, usage_report
from governance.selectors.usage import usage_by_tree_node
from governance.selectors.usage_daily import DayDelivery, delivery_by_day

WEEK_DAYS = 7
# A node whose agent has not reported for this long needs a look before the scheduler downs it.
STALE_HEARTBEAT = timedelta(minutes=2)


@dataclass
class QueueGlance:
    """The user's visible queue in numbers."""

    pending: int
    running: int
    running_gpus: int
    mine_pending: int
    mine_running: int


@dataclass
class DeliveryGlance:
    """One node the user answers for: owed and delivered over the last seven days."""

    kind: str
    node: Program | Project
    owed_gpu_hours: Decimal
    delivered_gpu_hours: Decimal
    owed_delivered_gpu_hours: Decimal
    delivery_ratio: Decimal | None
    hourly_delivery_ratio: Decimal | None
    days: list[DayDelivery] = field(default_factory=list)

    @property
    def above_owed_gpu_hours(self) -> Decimal:
        """GPU-hours delivered beyond the part of what was owed that was delivered: spare
        GPUs the node's projects were lent, else 0.

        Counted per project, as the delivery ratio is: in a program, one project's extra
        hours do not make up for another's missing ones. Counted on the node's totals, a
        program at 99.69 % read "all 13,106.4 owed, and 925 more" beside its ratio."""
        return max(Decimal(0), self.delivered_gpu_hours - self.owed_delivered_gpu_hours)

    @property
    def all_owed_delivered(self) -> bool:
        """Was all that was owed delivered, as the page rounds GPU-hours (one decimal)?"""
        shown = Decimal("0.1")
        return self.owed_delivered_gpu_hours.quantize(shown) >= self.owed_gpu_hours.quantize(shown)


@dataclass
class FinanceGlance:
    """Last month's usage report in two figures."""

    month: date
    gpu_hours: Decimal
    cost: Decimal | None
    currency: str | None


@dataclass
class NodesGlance:
    """One cluster's nodes that need an operator's attention."""

    cluster: Cluster
    total: int
    attention: list  # nodes not healthy, or healthy with a stale heartbeat


def home_queue(*, vis, user) -> QueueGlance | None:
    """The queue of the projects the user belongs to (None for someone in no project)."""
    from scheduler.choices import WorkloadState
    from scheduler.selectors.workloads import visible_workloads

    if not (vis.pi_project_ids or vis.member_project_ids):
        return None
    mine = Q(submitted_by=user)
    pending, running = Q(state=WorkloadState.PENDING), Q(state=WorkloadState.RUNNING)
    figures = (
        visible_workloads(vis)
        .filter(project_id__in=vis.pi_project_ids | vis.member_project_ids)
        .aggregate(
            pending=Count("id", filter=pending),
            running=Count("id", filter=running),
            running_gpus=Sum("gpus", filter=running),
            mine_pending=Count("id", filter=pending & mine),
            mine_running=Count("id", filter=running & mine),
        )
    )
    figures["running_gpus"] = figures["running_gpus"] or 0
    return QueueGlance(**figures)


def _answered_for(vis) -> list[tuple[str, Program | Project]]:
    """The programs the user manages and the projects they lead (not under such a program)."""
    programs = list(Program.objects.filter(pk__in=vis.managed_program_ids).order_by("name"))
    managed = {p.pk for p in programs}
    projects = Project.objects.filter(pk__in=vis.pi_project_ids).exclude(program_id__in=managed)
    return [("program", p) for p in programs] + [("project", p) for p in projects.order_by("name")]


def home_delivery(*, vis, now: datetime) -> list[DeliveryGlance]:
    """Owed vs delivered of each node the user answers for, over the last seven whole days
    plus today so far, with one point per UTC day (the dashboards' own figures)."""
    nodes = _answered_for(vis)
    if not nodes:
        return []
    end = now.astimezone(UTC)
    start = (end - timedelta(days=WEEK_DAYS - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    rows = {
        row.key: row
        for row in usage_by_tree_node(visibility=vis, cluster=None, start=start, end=end)
    }
    glances = []
    for kind, node in nodes:
        row = rows.get((kind, node.pk))
        if row is None:
            continue
        glances.append(
            DeliveryGlance(
                kind=kind,
                node=node,
                owed_gpu_hours=row.owed_gpu_hours,
                delivered_gpu_hours=row.delivered_gpu_hours,
                owed_delivered_gpu_hours=row.owed_delivered_gpu_hours,
                delivery_ratio=row.delivery_ratio,
                hourly_delivery_ratio=row.hourly_delivery_ratio,
                days=delivery_by_day(visibility=vis, node=node, start=start, end=end),
            )
        )
    return glances


def home_finance(*, vis, now: datetime) -> FinanceGlance | None:
    """Last calendar month's total GPU-hours and cost (None for who may not see reports)."""
    if not vis.can_view_reports:
        return None
    first_of_this = now.astimezone(UTC).date().replace(day=1)
    month = (first_of_this - timedelta(days=1)).replace(day=1)
    start, end = report_period_of_month(month)
    report = usage_report(visibility=vis, start=start, end=end, level="organization")
    totals = report.totals
    seconds = totals.budgeted_gpu_seconds + totals.burst_gpu_seconds + totals.free_gpu_seconds
    return FinanceGlance(
        month=month,
        gpu_hours=(seconds / 3600).quantize(Decimal("0.1")),
        cost=totals.cost if report.currency not in (None, "mixed") else None,
        currency=report.currency,
    )


def home_nodes(*, vis, now: datetime) -> list[NodesGlance]:
    """For an org admin: per cluster of their organizations, the nodes that are not healthy
    or whose agent has gone quiet (healthy, no heartbeat for ``STALE_HEARTBEAT``)."""
    from scheduler.choices import NodeState
    from scheduler.models import Node

    if not vis.admin_org_ids:
        return []
    glances = []
    clusters = Cluster.objects.filter(organization_id__in=vis.admin_org_ids).order_by("name")
    for cluster in clusters:
        nodes = Node.objects.filter(cluster=cluster)
        quiet = Q(last_heartbeat__lt=now - STALE_HEARTBEAT) | Q(last_heartbeat__isnull=True)
        attention = list(
            nodes.filter(~Q(state=NodeState.HEALTHY) | quiet).order_by("state", "name")[:20]
        )
        glances.append(NodesGlance(cluster=cluster, total=nodes.count(), attention=attention))
    return glances
