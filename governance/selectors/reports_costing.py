"""The usage report's sums: GPU-seconds and their rated cost per month, project and cluster.

Cost = Σ over hours of GPU-hours used x the ``CostRate`` of the cluster's GPU type in force
at the start of that hour, computed exactly in the database over the daily cache (days
wholly inside one rate) and the hourly rollup (the rest, and the days a rate changes
mid-day). The rounding to cents is the report's (``governance.selectors.reports``).
"""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.db.models import Case, DecimalField, F, Q, Sum, Value, When
from django.db.models.functions import TruncMonth

from governance.models import Cluster, CostRate, Project, UsageDay
from governance.selectors.usage_sources import add_sums, kept_while_final, usage_sources
from scheduler.models import UsageHour

ZERO = Decimal("0")

# Exact cost sums (GPU-seconds x a rate per GPU-hour) in the database.
_DEC = DecimalField(max_digits=40, decimal_places=10)


class RateSegment(NamedTuple):
    """An interval ``[start, end)`` with one cost rate (per GPU-hour) in force, and its currency."""

    start: datetime
    end: datetime
    rate: Decimal
    currency: str


def as_instant(day: date) -> datetime:
    """The UTC midnight that starts ``day``."""
    return datetime.combine(day, time.min, tzinfo=UTC)


def rate_segments(
    gpu_types: set[str], start: datetime, end: datetime
) -> dict[str, list[RateSegment]]:
    """Per GPU type, the intervals of ``[start, end)`` with the rate (and currency) in force.

    Same rule as allocations: the newest row (latest ``valid_from``, then id) whose window
    covers the instant. Intervals with no rate are left out.
    """
    rates = list(
        CostRate.objects.filter(gpu_type__in=gpu_types, valid_from__lt=end)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=start))
        .order_by("valid_from", "id")
    )
    segments: dict[str, list] = {}
    for gpu_type in gpu_types:
        mine = [r for r in rates if r.gpu_type == gpu_type]
        cuts = {start, end}
        for r in mine:
            for t in (r.valid_from, r.valid_to):
                if t is not None and start < t < end:
                    cuts.add(t)
        ordered = sorted(cuts)
        for a, b in itertools.pairwise(ordered):
            covering = [
                r for r in mine if r.valid_from <= a and (r.valid_to is None or a < r.valid_to)
            ]
            if not covering:
                continue
            best = max(covering, key=lambda r: (r.valid_from, r.pk))
            found = segments.setdefault(gpu_type, [])
            segment = RateSegment(a, b, best.rate_per_gpu_hour, best.currency)
            if found and found[-1].end == a and found[-1][2:] == segment[2:]:
                found[-1] = found[-1]._replace(end=b)  # the same rate goes on
            else:
                found.append(segment)
    return segments


def _rate_expression(clusters: list[Cluster], segments: dict, *, daily: bool) -> Case | Value:
    """SQL: the rate in force for a rollup row (by its cluster and hour), NULL when none.

    ``daily``: for ``UsageDay`` rows, whose days lie wholly inside one segment (days where
    a rate changes mid-day are read hour by hour).
    """
    whens = []
    for cluster in clusters:
        for a, b, rate, _currency in segments.get(cluster.gpu_type, []):
            if daily:
                condition = {"day__gte": _day_on_or_after(a), "day__lt": b.date()}
            else:
                condition = {"hour__gte": a, "hour__lt": b}
            whens.append(When(cluster_id=cluster.pk, then=Value(rate), **condition))
    if not whens:
        return Value(None, output_field=_DEC)
    return Case(*whens, default=Value(None), output_field=_DEC)


def _day_on_or_after(at: datetime) -> date:
    day = at.date()
    return day if at == as_instant(day) else day + timedelta(days=1)


def _split_days(clusters: list[Cluster], segments: dict) -> dict[int, set[date]]:
    """Days on which a cluster's rate changes other than at midnight (read hour by hour)."""
    found: dict[int, set[date]] = {}
    for cluster in clusters:
        for a, b, _rate, _currency in segments.get(cluster.gpu_type, []):
            for t in (a, b):
                if t != as_instant(t.date()):
                    found.setdefault(cluster.pk, set()).add(t.date())
    return found


def kept_monthly_sums(
    clusters: list[Cluster], projects: dict[int, Project], segments, begin, finish
) -> dict[tuple, dict]:
    """``_monthly_sums``, kept while all the usage they read is final (``kept_while_final``:
    a month that is over, once accounting has passed it): the month's bill is then the same
    on every read, and its grouped query over the daily cache is most of the page."""
    return kept_while_final(
        "reports:monthly-sums",
        cluster_ids=[c.pk for c in clusters],
        end=finish,
        inputs=(begin, finish, sorted(projects), sorted(segments.items())),
        make=lambda: _monthly_sums(clusters, projects, segments, begin, finish),
    )


def _monthly_sums(
    clusters: list[Cluster], projects: dict[int, Project], segments, begin, finish
) -> dict[tuple, dict]:
    """GPU-seconds (budgeted, burst, free, uncosted) and their rated cost per (month, project,
    cluster), from whole days in the daily cache and hours from the hourly rollup."""
    day_q, hour_q = usage_sources(
        cluster_ids=[c.pk for c in clusters],
        start=begin,
        end=finish,
        split_days=_split_days(clusters, segments),
    )
    total = F("budgeted_gpu_seconds") + F("burst_gpu_seconds") + F("free_gpu_seconds")
    sums: dict[tuple, dict] = {}
    for model, where, month, daily in (
        (UsageDay, day_q, TruncMonth("day"), True),
        (UsageHour, hour_q, TruncMonth("hour", tzinfo=UTC), False),
    ):
        if where is None:
            continue
        rows = (
            model.objects.filter(where, project_id__in=list(projects))
            .annotate(month=month, rate=_rate_expression(clusters, segments, daily=daily))
            .order_by()
            .values("month", "project_id", "cluster_id")
            .annotate(
                budgeted=Sum("budgeted_gpu_seconds"),
                burst=Sum("burst_gpu_seconds"),
                free=Sum("free_gpu_seconds"),
                rated=Sum(total * F("rate"), output_field=_DEC),
                uncosted=Sum(
                    Case(
                        When(rate__isnull=True, then=total),
                        default=Value(ZERO),
                        output_field=_DEC,
                    )
                ),
            )
        )
        for item in rows:
            month_start = item.pop("month")
            if isinstance(month_start, datetime):
                month_start = month_start.astimezone(UTC).date()
            key = (month_start, item.pop("project_id"), item.pop("cluster_id"))
            rated = item.pop("rated")
            add_sums(sums.setdefault(key, {}), item)
            if rated is not None:
                target = sums[key]
                target["rated"] = (target.get("rated") or ZERO) + rated
    return sums
