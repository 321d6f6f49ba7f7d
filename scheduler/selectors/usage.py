"""Reads of the usage ledger and its rollup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import F, Sum

from governance.models import Cluster, UsageDay
from governance.selectors.usage import usage_sources
from scheduler.models import UsageHour

# Every hour from the window's start on, as the hourly rollup alone was read.
_NO_END = datetime(9999, 1, 1, tzinfo=UTC)


def usage_window_by_project(
    *, cluster: Cluster, now: datetime, window_seconds: float
) -> dict[int, float]:
    """Charged GPU-seconds (budgeted + burst) per project over the sliding window.

    Read from the rollups, so it follows accounting incrementally and never scans the
    ledger: whole UTC days the daily cache holds from ``UsageDay`` (one row per project and
    day), the rest from the hourly rollup (``usage_sources``, the rule every report reads
    by), summed exactly before the one conversion to float. At 300 projects a 7-day window
    is 50,000 hourly rows against about 2,000. The window is whole hours: from the hour
    containing ``now - window`` on (the oldest hour counts in full; the engine only compares
    projects, which all see the same window).
    """
    start = (now - timedelta(seconds=window_seconds)).astimezone(UTC)
    start = start.replace(minute=0, second=0, microsecond=0)
    day_q, hour_q = usage_sources(cluster_ids=[cluster.pk], start=start, end=_NO_END)
    charged = Sum(F("budgeted_gpu_seconds") + F("burst_gpu_seconds"))
    totals: dict[int, Decimal] = {}
    for model, q in ((UsageDay, day_q), (UsageHour, hour_q)):
        if q is None:
            continue
        for project_id, total in (
            model.objects.filter(q).values_list("project_id").annotate(total=charged)
        ):
            totals[project_id] = totals.get(project_id, Decimal(0)) + (total or Decimal(0))
    return {project_id: float(total) for project_id, total in totals.items()}
