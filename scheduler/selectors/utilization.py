"""Reads of the GPU utilization store (``UtilizationHour``) and of the idle rule's policy.

Utilization is busy ÷ allocated GPU-seconds of what the agents measured; hours they did not
measure are absent, never 0 % busy. "Allocated but idle" GPU-seconds are allocated minus
busy of the measured hours.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import F, Sum
from django.db.models.functions import TruncDate

from governance.models import Cluster
from scheduler.models import IdlePolicy, Run, UtilizationHour

ZERO = Decimal(0)
DEFAULT_BUSY_BELOW_PERCENT = Decimal(5)
DEFAULT_FOR_MINUTES = 30
# The bounds of a cluster's idle rule, checked by the service and by the API's serializer
# alike: a percent in (0, PERCENT_MAX] with two decimals, a window of FOR_MINUTES minutes.
PERCENT_MAX = Decimal(100)
PERCENT_PLACES = 2
FOR_MINUTES = (5, 1440)
# The idle rule judges a run only when telemetry covers at least this share of its window
# (agents report every minute or so: the latest minute may not have arrived yet).
WINDOW_COVERAGE = Decimal("0.9")


@dataclass(frozen=True)
class IdleRule:
    """A cluster's effective idle rule (its ``IdlePolicy`` row, or the defaults)."""

    enabled: bool
    busy_below_percent: Decimal
    for_minutes: int
    is_default: bool
    updated_by_id: int | None = None
    updated_at: datetime | None = None


def idle_policy_effective(*, cluster: Cluster) -> IdleRule:
    """The rule that applies on ``cluster``: its row, or the defaults (on, < 5 % for 30 min)."""
    row = IdlePolicy.objects.filter(cluster=cluster).first()
    if row is None:
        return IdleRule(True, DEFAULT_BUSY_BELOW_PERCENT, DEFAULT_FOR_MINUTES, True)
    return IdleRule(
        row.enabled,
        row.busy_below_percent,
        row.for_minutes,
        False,
        row.updated_by_id,
        row.updated_at,
    )


@dataclass(frozen=True)
class WindowUse:
    """What telemetry says of one run over the idle window."""

    allocated: Decimal
    busy: Decimal
    covered_seconds: Decimal
    window_seconds: Decimal

    @property
    def covered(self) -> bool:
        """Telemetry covers (nearly) the whole window."""
        return self.allocated > 0 and self.covered_seconds >= self.window_seconds * WINDOW_COVERAGE

    @property
    def busy_percent(self) -> Decimal:
        return self.busy * 100 / self.allocated if self.allocated else ZERO


def _seconds(delta: timedelta) -> Decimal:
    return Decimal(delta // timedelta(microseconds=1)) / Decimal(1_000_000)


def idle_window(*, runs: Iterable[Run], minutes: int, now: datetime) -> dict[int, WindowUse]:
    """Allocated, busy and covered seconds of each run over [now - minutes, now].

    Rows are hourly: a row counts with the share of its reported span
    [covered_from, reported_until] that lies in the window, as if its use were even over
    the span. Within an hour the rule therefore sees the hour's average so far; a run that
    turns idle mid-hour is seen idle at the latest once the window holds only idle hours.
    """
    start = now - timedelta(minutes=minutes)
    window_seconds = Decimal(minutes * 60)
    ids = [run.pk for run in runs]
    found: dict[int, list[Decimal]] = {}
    rows = UtilizationHour.objects.filter(
        run_id__in=ids,
        hour__gte=start.astimezone(UTC).replace(minute=0, second=0, microsecond=0),
        reported_until__gt=start,
        covered_from__lt=now,
    )
    for row in rows:
        span = _seconds(row.reported_until - row.covered_from)
        overlap = _seconds(min(row.reported_until, now) - max(row.covered_from, start))
        if span <= 0 or overlap <= 0:
            continue
        share = overlap / span
        sums = found.setdefault(row.run_id, [ZERO, ZERO, ZERO])
        sums[0] += row.allocated_gpu_seconds * share
        sums[1] += row.busy_gpu_seconds * share
        sums[2] += row.covered_seconds * share
    return {
        run_id: WindowUse(allocated, busy, covered, window_seconds)
        for run_id, (allocated, busy, covered) in found.items()
    }


def utilization_by_project_day(*, cluster: Cluster, start: datetime, end: datetime) -> list[dict]:
    """Per project and UTC day of [start, end): allocated and busy GPU-seconds and
    ``utilization`` (busy ÷ allocated, None when nothing was measured), by day then project."""
    rows = (
        UtilizationHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
        .annotate(day=TruncDate("hour", tzinfo=UTC))
        .values("project_id", "day")
        .annotate(allocated=Sum("allocated_gpu_seconds"), busy=Sum("busy_gpu_seconds"))
        .order_by("day", "project_id")
    )
    return [
        {
            "project_id": row["project_id"],
            "day": row["day"],
            "allocated_gpu_seconds": row["allocated"],
            "busy_gpu_seconds": row["busy"],
            "utilization": row["busy"] / row["allocated"] if row["allocated"] else None,
        }
        for row in rows
    ]


def run_utilization_trace(*, run: Run) -> list[dict]:
    """A run's hourly trace (all its nodes summed per hour) for its workload's page:
    allocated, busy, utilization, the largest memory and the hour's samples."""
    rows = (
        UtilizationHour.objects.filter(run=run)
        .values("hour")
        .annotate(
            allocated=Sum("allocated_gpu_seconds"),
            busy=Sum("busy_gpu_seconds"),
            samples=Sum("samples"),
        )
        .order_by("hour")
    )
    memory: dict[datetime, int | None] = {}
    for hour, mib in UtilizationHour.objects.filter(run=run).values_list("hour", "memory_max_mib"):
        if mib is not None:
            memory[hour] = max(mib, memory.get(hour) or 0)
    return [
        {
            "hour": row["hour"],
            "allocated_gpu_seconds": row["allocated"],
            "busy_gpu_seconds": row["busy"],
            "utilization": row["busy"] / row["allocated"] if row["allocated"] else None,
            "samples": row["samples"],
            "memory_max_mib": memory.get(row["hour"]),
        }
        for row in rows
    ]


def allocated_idle_gpu_seconds_by_project(
    *, cluster: Cluster, start: datetime, end: datetime
) -> dict[int, Decimal]:
    """ "Allocated but idle" GPU-seconds per project over the hours of [start, end):
    allocated minus busy of the measured hours (unmeasured hours count nothing)."""
    rows = (
        UtilizationHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end)
        .values_list("project_id")
        .annotate(idle=Sum(F("allocated_gpu_seconds") - F("busy_gpu_seconds")))
    )
    return {project_id: idle or ZERO for project_id, idle in rows}


SECONDS_PER_HOUR = Decimal("3600")


class BusyAllocatedFigures:
    """What a figure made of ``allocated_gpu_seconds`` and ``busy_gpu_seconds`` (attributes
    or properties of the class it is mixed into) says: utilization and GPU-hours."""

    allocated_gpu_seconds: Decimal
    busy_gpu_seconds: Decimal

    @property
    def idle_gpu_seconds(self) -> Decimal:
        """Allocated but idle: allocated minus busy of the measured hours."""
        return self.allocated_gpu_seconds - self.busy_gpu_seconds

    @property
    def utilization(self) -> Decimal | None:
        """Busy ÷ allocated (0..1); ``None`` when nothing was measured."""
        allocated = self.allocated_gpu_seconds
        return min(self.busy_gpu_seconds / allocated, Decimal(1)) if allocated else None

    @property
    def allocated_gpu_hours(self) -> Decimal:
        """Allocated GPU-seconds in GPU-hours (for display)."""
        return self.allocated_gpu_seconds / SECONDS_PER_HOUR

    @property
    def busy_gpu_hours(self) -> Decimal:
        """Busy GPU-seconds in GPU-hours (for display)."""
        return self.busy_gpu_seconds / SECONDS_PER_HOUR

    @property
    def idle_gpu_hours(self) -> Decimal:
        """Allocated but idle GPU-seconds in GPU-hours (for display)."""
        return self.idle_gpu_seconds / SECONDS_PER_HOUR
