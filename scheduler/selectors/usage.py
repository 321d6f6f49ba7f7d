"""Reads of the usage ledger and its rollup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import F, Sum

from governance.models import Cluster
from scheduler.models import UsageHour


def usage_window_by_project(
    *, cluster: Cluster, now: datetime, window_seconds: float
) -> dict[int, float]:
    """Charged GPU-seconds (budgeted + burst) per project over the sliding window.

    Read from the hourly rollup, so it follows accounting incrementally and costs one
    indexed query over at most window/1 h rows per project, never a ledger scan. The window
    is whole hours: from the hour containing ``now - window`` up to ``now`` (the oldest hour
    counts in full; the engine only compares projects, which all see the same window).
    """
    start = (now - timedelta(seconds=window_seconds)).astimezone(UTC)
    start = start.replace(minute=0, second=0, microsecond=0)
    rows = (
        UsageHour.objects.filter(cluster=cluster, hour__gte=start)
        .values_list("project_id")
        .annotate(total=Sum(F("budgeted_gpu_seconds") + F("burst_gpu_seconds")))
    )
    return {project_id: float(total or Decimal(0)) for project_id, total in rows}
