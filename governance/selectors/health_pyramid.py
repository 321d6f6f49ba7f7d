"""Cluster health, the metrics pyramid of each UTC day: availability, occupancy and impact.

Read from the usage rollups (closed days from the daily cache, the rest from the hourly
rollup: ``governance.selectors.usage_sources.usage_sources``) and the share history. The
definitions are in ``governance.selectors.health``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.db.models import F, Q, Sum
from django.db.models.functions import Least, TruncDay

from governance.models import Cluster, UsageDay
from governance.selectors.tree import ShareRow, pick_shares, share_rows
from governance.selectors.usage_sources import kept_while_final, usage_sources
from scheduler.models import UsageHour

ZERO = Decimal("0")
HUNDRED = Decimal("100")
MILLI = Decimal("0.001")
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


@dataclass
class HealthDay:
    """The pyramid of one UTC day. Ratios are ``None`` when their denominator is unknown or 0.

    ``known_hours`` are the hours of the day that were measured: a day with any entitlement
    in the rollup is measured from its start (or the period's) up to its end, or up to how
    far accounting got today; a day with none is unknown (all ratios ``None``).
    """

    day: datetime
    known_hours: int = 0
    capacity_gpu_seconds: Decimal = ZERO
    healthy_gpu_seconds: Decimal = ZERO
    allocated_gpu_seconds: Decimal = ZERO
    allocated_known_gpu_seconds: Decimal = ZERO  # in the known hours (occupancy's numerator)
    charged_gpu_seconds: Decimal = ZERO
    free_gpu_seconds: Decimal = ZERO
    owed_gpu_seconds: Decimal = ZERO
    owed_delivered_gpu_seconds: Decimal = ZERO
    hourly_owed_delivered_gpu_seconds: Decimal = ZERO
    entitled_seen: bool = False  # any entitlement that day: its health can be measured

    @property
    def availability(self) -> Decimal | None:
        """Healthy ÷ all GPU-seconds over the known hours."""
        if not self.capacity_gpu_seconds:
            return None
        return self.healthy_gpu_seconds / self.capacity_gpu_seconds

    @property
    def occupancy(self) -> Decimal | None:
        """Allocated (charged + free) ÷ healthy GPU-seconds over the known hours, at most 1
        (work finishing on a draining node is allocated; the node is no longer healthy)."""
        if not self.healthy_gpu_seconds:
            return None
        return min(self.allocated_known_gpu_seconds / self.healthy_gpu_seconds, Decimal(1))

    @property
    def impact(self) -> Decimal | None:
        """Σ projects min(charged, owed) ÷ Σ owed for the day (None when nothing was owed)."""
        if not self.owed_gpu_seconds:
            return None
        return self.owed_delivered_gpu_seconds / self.owed_gpu_seconds

    @property
    def hourly_impact(self) -> Decimal | None:
        """Σ projects and hours min(charged, owed) ÷ Σ owed (no catch-up within the day)."""
        if not self.owed_gpu_seconds:
            return None
        return self.hourly_owed_delivered_gpu_seconds / self.owed_gpu_seconds

    # For display: percents (0-100) and GPU-hours.
    @property
    def availability_pct(self) -> Decimal | None:
        return _pct(self.availability)

    @property
    def occupancy_pct(self) -> Decimal | None:
        return _pct(self.occupancy)

    @property
    def impact_pct(self) -> Decimal | None:
        return _pct(self.impact)

    @property
    def hourly_impact_pct(self) -> Decimal | None:
        return _pct(self.hourly_impact)

    @property
    def allocated_gpu_hours(self) -> Decimal:
        return self.allocated_gpu_seconds / 3600

    @property
    def owed_gpu_hours(self) -> Decimal:
        return self.owed_gpu_seconds / 3600


def _pct(ratio: Decimal | None) -> Decimal | None:
    return None if ratio is None else ratio * HUNDRED


class ShareSteps(NamedTuple):
    """Σ of budgeted projects' effective shares (percent of the cluster) as a step function:
    ``sums[i]`` from ``instants[i]`` on (the first instant is the period's start)."""

    instants: list[datetime]
    sums: list[Decimal]

    def at(self, t: datetime) -> Decimal:
        """The sum in force at ``t``."""
        return self.sums[max(bisect_right(self.instants, t) - 1, 0)]

    def over(
        self, hour: datetime, measured_from: datetime | None, measured_until: datetime
    ) -> Decimal:
        """The sum averaged over the seconds of ``hour`` that were accounted: entitlement was
        written at the shares in force each second, so a share changed mid-hour must weigh
        each part by its seconds (not take the total at the hour's start, which made
        availability pass 100 %)."""
        instants, sums = self.instants, self.sums
        a = max(hour, measured_from or hour)
        b = min(hour + HOUR, measured_until)
        if b <= a:
            return self.at(hour)
        i = max(bisect_right(instants, a) - 1, 0)
        t, weighted = a, ZERO
        while t < b:
            step_end = min(instants[i + 1], b) if i + 1 < len(instants) else b
            weighted += sums[i] * Decimal(str((step_end - t).total_seconds()))
            t, i = step_end, i + 1
        return weighted / Decimal(str((b - a).total_seconds()))


def _effective_share_steps(
    cluster: Cluster, start: datetime, end: datetime, rows: list[ShareRow] | None = None
) -> ShareSteps:
    """Σ of budgeted projects' effective shares (percent of the cluster), as a step function.

    Returns change instants and the sum from each instant on (the first instant is
    ``start``). A project counts when its program holds a share too — the same rule as the
    engine's budget tree and usage accounting (``cluster_budget``). ``rows``: the cluster's
    share rows when already read (``share_rows``).
    """
    if rows is None:
        rows = share_rows(cluster=cluster)
    program_of = dict(
        cluster.organization.programs.values_list("projects__id", "id").exclude(projects__id=None)
    )
    changes = {start}
    for row in rows:
        for t in (row.valid_from, row.valid_to):
            if t is not None and start < t < end:
                changes.add(t)
    instants = sorted(changes)
    sums = []
    for t in instants:
        shares = pick_shares(rows, t)
        total = ZERO
        for (kind, node_id), percent in shares.items():
            if kind != "project" or percent <= 0:
                continue
            program_share = shares.get(("program", program_of.get(node_id)), ZERO)
            if program_share > 0:
                total += program_share * percent / HUNDRED
        sums.append(total)
    return ShareSteps(instants, sums)


def _add_healthy(day: HealthDay, entitled: Decimal, effective: Decimal) -> None:
    """Add the healthy GPU-seconds that ``entitled`` GPU-seconds at ``effective`` percent
    of the cluster stand for."""
    if entitled > 0 and effective > 0:
        # Entitlement is stored to the microsecond, rounded down per record; read back
        # through the share it is off by a few millionths of a GPU-second (and a day of
        # healthy nodes read 99.99999 %): healthy time is whole milli-GPU-seconds.
        healthy = (entitled * HUNDRED / effective).quantize(MILLI)
        day.healthy_gpu_seconds += healthy
        day.entitled_seen = True


def _add_cached_days(days: dict[datetime, HealthDay], day_q: Q, steps: ShareSteps) -> None:
    """Add the daily cache's closed days (one grouped query, a row per day)."""
    charged = F("budgeted_gpu_seconds") + F("burst_gpu_seconds")
    for row in (
        UsageDay.objects.filter(day_q)
        .values("day")
        .annotate(
            charged=Sum(charged),
            free=Sum("free_gpu_seconds"),
            entitled=Sum("entitled_gpu_seconds"),
            owed=Sum("owed_gpu_seconds"),
            owed_delivered=Sum(Least(charged, F("owed_gpu_seconds"))),
            hourly=Sum("hourly_owed_delivered_gpu_seconds"),
        )
    ):
        at = datetime(row["day"].year, row["day"].month, row["day"].day, tzinfo=UTC)
        day = days.get(at)
        if day is None:
            continue
        _add_day_sums(day, row)
        _add_healthy(day, row["entitled"] or ZERO, steps.at(at))


def _add_hourly_days(
    days: dict[datetime, HealthDay],
    hour_q: Q,
    steps: ShareSteps,
    measured_from: datetime | None,
    measured_until: datetime,
) -> None:
    """Add the hours read from the hourly rollup: the sums per project and day (min(charged,
    owed) is per project), then healthy time hour by hour."""
    hours = UsageHour.objects.filter(hour_q)
    owed = Least(F("entitled_gpu_seconds"), F("demand_gpu_seconds"))
    charged = F("budgeted_gpu_seconds") + F("burst_gpu_seconds")
    per_project_day = (
        hours.annotate(bucket=TruncDay("hour", tzinfo=UTC))
        .values("bucket", "project_id")
        .annotate(
            charged=Sum(charged),
            free=Sum("free_gpu_seconds"),
            owed=Sum(owed),
            hourly=Sum(Least(charged, owed)),
        )
    )
    for row in per_project_day:
        day = days.get(row["bucket"].astimezone(UTC))
        if day is not None:
            charged_s, owed_s = row["charged"] or ZERO, row["owed"] or ZERO
            _add_day_sums(day, {**row, "owed_delivered": min(charged_s, owed_s)})
    for hour, entitled in hours.values_list("hour").annotate(entitled=Sum("entitled_gpu_seconds")):
        hour = hour.astimezone(UTC)
        day = days.get(hour.replace(hour=0))
        if day is not None:
            _add_healthy(day, entitled or ZERO, steps.over(hour, measured_from, measured_until))


def _measure(
    days: dict[datetime, HealthDay],
    start: datetime,
    end: datetime,
    gpus: int,
    measured_from: datetime | None,
    measured_until: datetime,
) -> None:
    """Set the known hours and capacity of each day with any entitlement: its seconds in
    ``[start, end)`` from ``measured_from`` (None: the period's start) up to
    ``measured_until``."""
    for at, day in days.items():
        if not day.entitled_seen:
            continue  # nothing budgeted or nothing accounted: health unknown that day
        begin = max(at, start, measured_from or start)
        seconds = (min(at + DAY, measured_until, end) - begin).total_seconds()
        if seconds > 0:
            day.known_hours = math.ceil(seconds / 3600)
            day.capacity_gpu_seconds = Decimal(gpus) * Decimal(str(seconds))
            day.allocated_known_gpu_seconds = day.allocated_gpu_seconds


def _pyramid_days(
    cluster: Cluster,
    start: datetime,
    end: datetime,
    gpus: int,
    measured_until: datetime,
    measured_from: datetime | None = None,
    rows: list[ShareRow] | None = None,
) -> list[HealthDay]:
    """One ``HealthDay`` per UTC day of ``[start, end)`` (``rows``: the cluster's share rows
    when already read).

    Closed days come from the daily cache (``UsageDay``, one grouped query returning a row
    per day); today, days not cached yet and days when the budgeted share changed are read
    from the hourly rollup (``usage_sources`` splits the period; the figures are the same
    either way). A day with any entitlement is measured over its seconds from
    ``measured_from`` (when accounting began; None: the period's start) up to
    ``measured_until`` (how far accounting got).
    """
    steps = _effective_share_steps(cluster, start, end, rows)
    # A change of the budgeted total inside a day: that day is read hour by hour.
    split = {t.date() for t in steps.instants[1:] if t != t.replace(hour=0, minute=0, second=0)}
    day_q, hour_q = usage_sources(
        cluster_ids=[cluster.pk], start=start, end=end, split_days={cluster.pk: split}
    )
    first_day = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days: dict[datetime, HealthDay] = {}
    cursor = first_day
    while cursor < end:
        days[cursor] = HealthDay(day=cursor)
        cursor += DAY
    if day_q is not None:
        _add_cached_days(days, day_q, steps)
    if hour_q is not None:
        _add_hourly_days(days, hour_q, steps, measured_from, measured_until)
    _measure(days, start, end, gpus, measured_from, measured_until)
    return list(days.values())


def pyramid_days_kept(
    cluster: Cluster,
    start: datetime,
    end: datetime,
    gpus: int,
    measured_until: datetime,
    measured_from: datetime | None,
) -> list[HealthDay]:
    """``_pyramid_days``, its whole days before the last final hour's day kept while their
    usage is final (``kept_while_final``) and the shares, the GPUs and the start of
    accounting are as they were; the days after read every time. A month's page then reads
    only today's hours: the closed days' grouped queries were most of its time."""
    last_final = (measured_until - HOUR).astimezone(UTC)
    split = max(start, min(end, last_final.replace(hour=0, minute=0, second=0, microsecond=0)))
    rows = share_rows(cluster=cluster)
    if split <= start or split.hour or split.minute or split.second or split.microsecond:
        return _pyramid_days(cluster, start, end, gpus, measured_until, measured_from, rows)
    shares = sorted(
        (r.order, r.node, str(r.percent), r.valid_from.timestamp(), r.valid_to and r.valid_to.timestamp())
        for r in rows
    )  # fmt: skip
    closed = kept_while_final(
        "health:pyramid-days",
        cluster_ids=[cluster.pk],
        end=split,
        inputs=(
            start.timestamp(),
            split.timestamp(),
            gpus,
            measured_from and measured_from.timestamp(),
            shares,
        ),
        # Every second of these days is before ``split``: measured in full, whatever the
        # hour accounting has reached since.
        make=lambda: _pyramid_days(cluster, start, split, gpus, split, measured_from, rows),
    )
    if split >= end:
        return closed
    return closed + _pyramid_days(cluster, split, end, gpus, measured_until, measured_from, rows)


def _add_day_sums(day: HealthDay, row: dict) -> None:
    """Add one group's sums (charged, free, owed, min(charged, owed), hourly) to a day."""
    charged, free = row["charged"] or ZERO, row["free"] or ZERO
    day.charged_gpu_seconds += charged
    day.free_gpu_seconds += free
    day.allocated_gpu_seconds += charged + free
    day.owed_gpu_seconds += row["owed"] or ZERO
    day.owed_delivered_gpu_seconds += row["owed_delivered"] or ZERO
    day.hourly_owed_delivered_gpu_seconds += row["hourly"] or ZERO
