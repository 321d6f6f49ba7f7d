"""The fair-share page's history: the instants it ranks at and the usage window ending at each.

Each past instant is ranked with the charged GPU-seconds of the same whole-hour window the
live cycle reads (``scheduler.selectors.usage.usage_window_by_project``), read here for all
the instants at once in grouped queries.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import F, FloatField, Sum
from django.db.models.functions import Cast, TruncDay, TruncHour

from governance.models import Cluster, UsageDay
from governance.selectors.usage_sources import kept_while_final, usage_sources
from scheduler.models import UsageHour

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


def history_instants(
    now: datetime, days: int, first_hour: datetime | None = None
) -> list[datetime]:
    """The UTC midnights ending each of the last ``days`` days, then ``now``; from a new
    installation's ``first_hour`` (``first_accounted_hour``), the ends of its hours instead
    (its history would otherwise be one or two dots)."""
    if first_hour is not None:
        hour = timedelta(hours=1)
        t = first_hour + hour
        hours = []
        while t < now:
            hours.append(t)
            t += hour
        return [*hours, now]
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    points = [today - DAY * (days - 1 - k) for k in range(days)]
    points = [p for p in points if p < now]
    return [*points, now]


def windowed_usage(
    cluster: Cluster, instants: list[datetime], window: timedelta
) -> list[dict[int, float]]:
    """Charged GPU-seconds per project over the window ending at each past instant.

    The same whole-hour window as ``usage_window_by_project`` (from the hour containing
    ``t - window`` up to ``t``), read in grouped queries: by UTC day when the instants are
    midnights and the window is whole days — closed days from the daily cache
    (``UsageDay``, via ``usage_sources``), the others from the hourly rollup — else by hour.
    A project is in an instant's figures when it has a bucket in that window.
    """
    if not instants:
        return []

    def window_start(t: datetime) -> datetime:
        return (t - window).astimezone(UTC).replace(minute=0, second=0, microsecond=0)

    by_day = window % DAY == timedelta(0) and all(
        t.astimezone(UTC).hour == 0 and t.minute == 0 and t.second == 0 and t.microsecond == 0
        for t in instants
    )
    charged = F("budgeted_gpu_seconds") + F("burst_gpu_seconds")
    step = DAY if by_day else HOUR
    start, end = window_start(instants[0]), instants[-1]
    buckets = -(-(end - start) // step)  # those that start before ``end``
    # Per project, its amount in each bucket from ``start`` (0.0 where it has none) and
    # whether it has that bucket at all.
    amounts: dict[int, list[float]] = {}
    present: dict[int, list[bool]] = {}

    def add(index: int, project_id: int, amount: float) -> None:
        if project_id not in amounts:
            amounts[project_id] = [0.0] * buckets
            present[project_id] = [False] * buckets
        amounts[project_id][index] += amount
        present[project_id][index] = True

    if by_day:
        # Closed days from the daily cache, the rest from the hourly rollup (same figures).
        day_q, hour_q = usage_sources(cluster_ids=[cluster.pk], start=start, end=end)
        if day_q is not None:
            # One row per project and day (``usage_sources`` takes whole days and one set of
            # the open day's rows): no grouping needed, and float8 from the database saves a
            # Decimal per row (the same value: both conversions round to the nearest double).
            first_day = start.date()
            for day, project_id, total in (
                UsageDay.objects.filter(day_q)
                .order_by()  # any order: each row goes to its own bucket
                .values_list("day", "project_id", Cast(charged, FloatField()))
            ):
                add((day - first_day).days, project_id, total)
        hours = UsageHour.objects.filter(hour_q) if hour_q is not None else None
    else:
        hours = UsageHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
    if hours is not None:
        trunc = TruncDay if by_day else TruncHour
        for bucket, project_id, total in (
            hours.annotate(bucket=trunc("hour", tzinfo=UTC))
            .values_list("bucket", "project_id")
            .annotate(total=Sum(charged))
        ):
            add((bucket.astimezone(UTC) - start) // step, project_id, float(total or 0))
    result = []
    for t in instants:
        first = (window_start(t) - start) // step
        last = first + -(-(t - window_start(t)) // step)  # the buckets that start before t
        result.append(
            {
                project_id: sum(values[first:last])  # in bucket order, as before
                for project_id, values in amounts.items()
                if any(present[project_id][first:last])
            }
        )
    return result


def past_usage(
    cluster: Cluster, instants: list[datetime], window: timedelta
) -> list[dict[int, float]]:
    """``windowed_usage`` at past ``instants``, kept while every hour it reads is final
    (``kept_while_final``); read every time otherwise (the first hour after midnight, or
    accounting behind)."""
    if not instants:
        return []
    return kept_while_final(
        "fairshare:past-usage",
        cluster_ids=[cluster.pk],
        end=instants[-1],
        inputs=(window.total_seconds(), [t.timestamp() for t in instants]),
        make=lambda: windowed_usage(cluster, instants, window),
    )
