"""Where the usage figures of a period are read from, and how a figure of final usage is kept.

Closed UTC days come from the daily cache (``governance.models.UsageDay``), the rest from the
hourly rollup (``scheduler.models.UsageHour``): ``usage_sources`` splits a period between them
so that every hour is read exactly once. ``HOUR_AGGREGATES`` and ``DAY_AGGREGATES`` are the
same sums over either. ``kept_while_final`` keeps a figure made only of usage that is never
written again (``final_usage_state``) in Django's cache.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.core.cache import cache
from django.db.models import Case, DecimalField, F, Q, Sum, Value, When
from django.db.models.functions import Least

from governance.models import UsageDayCursor
from scheduler.models import AccountingCursor

ZERO = Decimal("0")


def midnight(day) -> datetime:
    """The UTC midnight that starts ``day``."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


class UsageSources(NamedTuple):
    """The filters of the daily cache's rows and of the hourly rows a period reads (``None``:
    none of that kind)."""

    days: Q | None
    hours: Q | None


def _ceil_day(at: datetime):
    at = at.astimezone(UTC)
    day = at.date()
    return day if at == midnight(day) else day + timedelta(days=1)


def usage_sources(
    *, cluster_ids: list[int], start: datetime, end: datetime, split_days=None
) -> UsageSources:
    """Filters for ``UsageDay`` and ``UsageHour`` that together cover ``[start, end)`` of
    each cluster exactly once.

    Whole UTC days below the cluster's ``UsageDayCursor.until`` come from the daily cache;
    so do the open day's hours before ``open_through`` when the period takes that day from
    its midnight past them. The partial days at the ends, the days not yet cached, the rest
    of the open day and the days in ``split_days`` (``{cluster_id: set of dates}``, e.g. a
    cost rate changing mid-day) come from the hourly rows. Either filter is ``None`` when
    it selects nothing. The cursors are read once, so a refresh running meanwhile changes
    nothing a reader takes (it keeps the rows it replaces one refresh longer).
    """
    split_days = split_days or {}
    cursors = {
        cluster_id: (until, open_through)
        for cluster_id, until, open_through in UsageDayCursor.objects.filter(
            cluster_id__in=cluster_ids
        ).values_list("cluster_id", "until", "open_through")
    }
    day_q: Q | None = None
    hour_q: Q | None = None

    def add_hours(cluster_id: int, a: datetime, b: datetime) -> None:
        nonlocal hour_q
        if a < b:
            q = Q(cluster_id=cluster_id, hour__gte=a, hour__lt=b)
            hour_q = q if hour_q is None else hour_q | q

    def add_days(cluster_id: int, a, b) -> None:
        nonlocal day_q
        if a < b:
            q = Q(cluster_id=cluster_id, day__gte=a, day__lt=b, through__isnull=True)
            day_q = q if day_q is None else day_q | q

    for cluster_id in cluster_ids:
        first = _ceil_day(start)
        until, open_through = cursors.get(cluster_id, (first, None))
        last = min(end.astimezone(UTC).date(), until)
        if last <= first:
            rest = start
        else:
            add_hours(cluster_id, start, midnight(first))
            day = first
            for split in sorted(d for d in split_days.get(cluster_id, ()) if first <= d < last):
                add_days(cluster_id, day, split)
                add_hours(cluster_id, midnight(split), midnight(split) + timedelta(days=1))
                day = split + timedelta(days=1)
            add_days(cluster_id, day, last)
            rest = midnight(last)
        # The open day's cached hours, when what is left starts at its midnight and runs
        # past them (and the day is not one to read hour by hour).
        if (
            open_through is not None
            and rest == midnight(until)
            and open_through <= end
            and until not in split_days.get(cluster_id, ())
        ):
            q = Q(cluster_id=cluster_id, day=until, through=open_through)
            day_q = q if day_q is None else day_q | q
            rest = open_through
        add_hours(cluster_id, rest, end)
    return UsageSources(day_q, hour_q)


def final_usage_state(*, cluster_ids: list[int], end: datetime) -> str | None:
    """A name for the usage of ``cluster_ids`` before ``end`` when all of it is final, else
    None: a figure made only of that usage may be kept under this name.

    The hours before ``AccountingCursor.accounted_until`` minus an hour are never written
    again (the daily cache seals days by the same rule), except by a late import or a
    rebuild, which both give the cluster's daily-cache cursor a new ``generation``
    (``usage_days_reopen``, or a new cursor). The name carries each cluster's cursor state,
    so such a write, or a roll of the cache, names the usage anew. None without accounting
    or a daily cache (SQLite, a new installation), or when ``end`` is past the final hour.
    """
    accounted = dict(
        AccountingCursor.objects.filter(cluster_id__in=cluster_ids).values_list(
            "cluster_id", "accounted_until"
        )
    )
    states = {
        cluster_id: (until, open_through, generation)
        for cluster_id, until, open_through, generation in UsageDayCursor.objects.filter(
            cluster_id__in=cluster_ids
        ).values_list("cluster_id", "until", "open_through", "generation")
    }
    parts = []
    for cluster_id in sorted(set(cluster_ids)):
        if cluster_id not in accounted or cluster_id not in states:
            return None
        if end > accounted[cluster_id] - timedelta(hours=1):
            return None
        until, open_through, generation = states[cluster_id]
        through = open_through.isoformat() if open_through else "-"
        parts.append(f"{cluster_id}/{until}/{through}/{generation.hex}")
    return ",".join(parts) if parts else None


# How long a figure of final usage is kept: it never changes (``final_usage_state``); a day
# bounds the memory of figures nobody asks for any more.
FINAL_FIGURE_SECONDS = 86400


def kept_while_final(name: str, *, cluster_ids: list[int], end: datetime, inputs, make):
    """``make()``, kept in Django's cache when all the usage of ``cluster_ids`` before ``end``
    is final (``final_usage_state``), under ``name``, that state and ``inputs`` (whatever
    else the figure depends on, as a ``repr``-able value); made every time otherwise."""
    state = final_usage_state(cluster_ids=cluster_ids, end=end)
    if state is None:
        return make()
    described = repr((state, inputs))
    key = f"{name}:" + hashlib.sha256(described.encode()).hexdigest()
    found = cache.get(key)
    if found is None:
        found = make()
        cache.set(key, found, FINAL_FIGURE_SECONDS)
    return found


# The daily cache's columns under the names of HOUR_AGGREGATES.
DAY_AGGREGATES = {
    "budgeted": Sum("budgeted_gpu_seconds"),
    "burst": Sum("burst_gpu_seconds"),
    "free": Sum("free_gpu_seconds"),
    "entitled": Sum("entitled_gpu_seconds"),
    "demand": Sum("demand_gpu_seconds"),
    "owed": Sum("owed_gpu_seconds"),
    "hourly_owed_delivered": Sum("hourly_owed_delivered_gpu_seconds"),
    "no_share_budgeted": Sum("no_share_budgeted_gpu_seconds"),
}


def add_sums(target: dict, source: dict) -> None:
    """Add the Decimal sums of ``source`` into ``target`` (None counts as 0)."""
    for name, value in source.items():
        target[name] = (target.get(name) or ZERO) + (value or ZERO)


# Exact GPU-seconds as a sum of rollup columns comes back (the column type of the rollups).
EXACT_SECONDS = DecimalField(max_digits=30, decimal_places=6)
# Charged (= delivered) and owed GPU-seconds of one hourly rollup row.
CHARGED = F("budgeted_gpu_seconds") + F("burst_gpu_seconds")
OWED = Least(F("entitled_gpu_seconds"), F("demand_gpu_seconds"))

# The per-hour aggregates every usage figure is made of (all exact numeric in PostgreSQL).
HOUR_AGGREGATES = {
    "budgeted": Sum("budgeted_gpu_seconds"),
    "burst": Sum("burst_gpu_seconds"),
    "free": Sum("free_gpu_seconds"),
    "entitled": Sum("entitled_gpu_seconds"),
    "demand": Sum("demand_gpu_seconds"),
    "owed": Sum(OWED, output_field=EXACT_SECONDS),
    "hourly_owed_delivered": Sum(Least(CHARGED, OWED), output_field=EXACT_SECONDS),
    # Charged time in hours with no entitlement: usage of a project with no share.
    "no_share_budgeted": Sum(
        Case(
            When(entitled_gpu_seconds=0, then=F("budgeted_gpu_seconds")),
            default=Value(ZERO),
            output_field=EXACT_SECONDS,
        )
    ),
}
