"""Owed and delivered of one node of the tree per UTC day, each day counted as the delivery
ratio counts a period: per project first.

A day's delivered part of what was owed is Σ over the node's projects (on each cluster) of
min(charged, owed) that day. Summed over the node first, one project's extra hours would
cover another's missing ones, and a program's day could read "everything owed" while one
of its projects was short (``usage`` defines the ratio; ``usage_timeseries`` gives the
node's totals per bucket, for charts).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.db.models import Sum
from django.db.models.functions import TruncDay

from governance.models import Program, Project, UsageDay
from governance.selectors.usage_rows import ZERO
from governance.selectors.usage_scope import subtree_projects
from governance.selectors.usage_sources import CHARGED, EXACT_SECONDS, OWED, usage_sources
from scheduler.models import UsageHour

HOUR = Decimal(3600)


@dataclass
class DayDelivery:
    """One UTC day of a node: GPU-hours owed, delivered (charged) and the part of what was
    owed that was delivered (Σ projects min(charged, owed))."""

    day: date
    owed_gpu_hours: Decimal
    delivered_gpu_hours: Decimal
    owed_delivered_gpu_hours: Decimal

    @property
    def ratio(self) -> Decimal | None:
        """The day's delivery ratio (at most 1; None when nothing was owed)."""
        if not self.owed_gpu_hours:
            return None
        return self.owed_delivered_gpu_hours / self.owed_gpu_hours


def delivery_by_day(
    *, visibility, node: Program | Project, start: datetime, end: datetime
) -> list[DayDelivery]:
    """Each UTC day from ``start``'s to the one before ``end`` (``end`` exclusive) for
    ``node``'s projects on every cluster the user sees; days with nothing are zeros. Two
    queries at most (the daily cache and the hours it does not hold)."""
    projects = subtree_projects(visibility=visibility, node=node).values("id")
    cluster_ids = list(visibility.clusters().values_list("id", flat=True))
    days_q, hours_q = usage_sources(cluster_ids=cluster_ids, start=start, end=end)
    # (day, project, cluster): the delivery ratio takes min(charged, owed) per project and
    # cluster (``usage.usage_by_tree_node``).
    sums: dict[tuple[date, int, int], list[Decimal]] = {}

    def add(day: date, row: dict) -> None:
        owed, charged = row["owed"], row["charged"]
        pair = sums.setdefault((day, row["project_id"], row["cluster_id"]), [ZERO, ZERO])
        pair[0] += owed or ZERO
        pair[1] += charged or ZERO

    if days_q is not None:
        for row in (
            UsageDay.objects.filter(days_q, project_id__in=projects)
            .order_by()
            .values("day", "project_id", "cluster_id")
            .annotate(
                owed=Sum("owed_gpu_seconds"), charged=Sum(CHARGED, output_field=EXACT_SECONDS)
            )
        ):
            add(row["day"], row)
    if hours_q is not None:
        for row in (
            UsageHour.objects.filter(hours_q, project_id__in=projects)
            .annotate(day=TruncDay("hour", tzinfo=UTC))
            .order_by()
            .values("day", "project_id", "cluster_id")
            .annotate(
                owed=Sum(OWED, output_field=EXACT_SECONDS),
                charged=Sum(CHARGED, output_field=EXACT_SECONDS),
            )
        ):
            add(row["day"].astimezone(UTC).date(), row)
    totals: dict[date, list[Decimal]] = {}
    for (day, _project, _cluster), (owed, charged) in sums.items():
        total = totals.setdefault(day, [ZERO, ZERO, ZERO])
        total[0] += owed
        total[1] += charged
        total[2] += min(owed, charged)
    first = start.astimezone(UTC).date()
    count = (end.astimezone(UTC) - timedelta(microseconds=1)).date() - first
    result = []
    for offset in range(count.days + 1):
        day = first + timedelta(days=offset)
        owed, charged, both = totals.get(day, (ZERO, ZERO, ZERO))
        result.append(DayDelivery(day, owed / HOUR, charged / HOUR, both / HOUR))
    return result
