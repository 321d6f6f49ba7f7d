"""GPU telemetry summed for the governance pages: busy and allocated GPU-seconds per project.

Read from what the node agents measured (``scheduler.models.UtilizationHour``, per run, node
and UTC hour; whole days from its exact day sums ``UtilizationDay``), one grouped query per
page. Hours the agents did not measure have no row, so
they are absent here — never 0 % busy: a project with no row has no ``Telemetry`` at all
and the pages say "no telemetry" for it. "Allocated but idle" GPU-seconds are allocated
minus busy of the measured hours; they are charged like any other GPU time (the ledger,
``scheduler.models.UsageHour``, knows nothing of them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db import connection
from django.db.models import BigIntegerField, DateField, F, Sum, Value
from django.db.models.functions import TruncDay, TruncMonth

from scheduler.models import UtilizationDay, UtilizationHour
from scheduler.selectors.utilization import BusyAllocatedFigures

ZERO = Decimal("0")
PER = (None, "day", "month")


@dataclass
class Telemetry(BusyAllocatedFigures):
    """Allocated and busy GPU-seconds of measured hours (busy <= allocated, row by row)."""

    allocated_gpu_seconds: Decimal = ZERO
    busy_gpu_seconds: Decimal = ZERO

    def add(self, other: Telemetry) -> None:
        """Add another bucket's sums (a project's into its program, a day into the total)."""
        self.allocated_gpu_seconds += other.allocated_gpu_seconds
        self.busy_gpu_seconds += other.busy_gpu_seconds


def telemetry_sums(
    *,
    cluster_ids: Iterable[int],
    start: datetime,
    end: datetime,
    per: str | None = None,
    project_ids: Iterable[int] | None = None,
) -> dict[tuple, Telemetry]:
    """Telemetry of the hours of ``[start, end)`` on ``cluster_ids``, one grouped query.

    Keyed ``(bucket, project_id, cluster_id)``: ``bucket`` is the UTC day (``per="day"``),
    the first day of the UTC month (``per="month"``) or ``None``. ``project_ids`` narrows
    the rows (the caller passes the projects the viewer may see; ``None``: every project —
    for cluster-wide figures only). Only buckets with measured time are keys. A period of
    whole UTC days is read from the day sums (``UtilizationDay``, kept exact by the
    database), any other from the hour rows.
    """
    if per not in PER:
        raise ValueError(f"per must be one of {PER}")
    if _midnight(start) and _midnight(end):
        rows = UtilizationDay.objects.filter(
            day__gte=start.astimezone(UTC).date(), day__lt=end.astimezone(UTC).date()
        )
        day, month = F("day"), TruncMonth("day")
    else:
        rows = UtilizationHour.objects.filter(hour__gte=start, hour__lt=end)
        day, month = TruncDay("hour", tzinfo=UTC), TruncMonth("hour", tzinfo=UTC)
    rows = rows.filter(cluster_id__in=list(cluster_ids))
    if project_ids is not None:
        rows = rows.filter(project_id__in=list(project_ids))
    fields = ["project_id", "cluster_id"]
    if per is not None:
        rows = rows.annotate(bucket=day if per == "day" else month)
        fields.insert(0, "bucket")
    grouped = (
        rows.order_by()
        .values_list(*fields)
        .annotate(allocated=Sum("allocated_gpu_seconds"), busy=Sum("busy_gpu_seconds"))
    )
    found: dict[tuple, Telemetry] = {}
    for item in grouped:
        *key, allocated, busy = item
        if not allocated:
            continue  # a day row whose hour rows were all deleted: nothing measured
        bucket = _day(key.pop(0)) if per else None
        found[(bucket, *key)] = Telemetry(allocated, busy or ZERO)
    return found


def _midnight(at: datetime) -> bool:
    """``at`` is a UTC midnight (a period of whole days starts or ends there)."""
    at = at.astimezone(UTC)
    return (at.hour, at.minute, at.second, at.microsecond) == (0, 0, 0, 0)


def _day(value: datetime | date) -> date:
    """A truncated bucket as its UTC date (PostgreSQL answers an aware datetime)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).date()
    return value


def telemetry_by_project(
    sums: dict[tuple, Telemetry], *, project_ids: Iterable[int] | None = None
) -> dict[int, Telemetry]:
    """``telemetry_sums`` added up per project (over buckets and clusters)."""
    wanted = None if project_ids is None else set(project_ids)
    found: dict[int, Telemetry] = {}
    for (_bucket, project_id, _cluster_id), telemetry in sums.items():
        if wanted is None or project_id in wanted:
            found.setdefault(project_id, Telemetry()).add(telemetry)
    return found


def telemetry_by_tree_node(
    rows: Iterable, by_project: dict[int, Telemetry]
) -> dict[tuple, Telemetry]:
    """Telemetry per node of the tree for ``rows`` (``usage.UsageRow``s: ``kind``, ``id``,
    ``key``, ``parent``): a project's own, a program's or organization's the sum of its
    projects with telemetry. A node none of whose projects was measured has no key (the page
    says "no telemetry", not 0)."""
    rows = list(rows)
    parents = {row.key: row.parent for row in rows}
    found: dict[tuple, Telemetry] = {}
    for row in rows:
        if row.kind != "project" or row.id not in by_project:
            continue
        key = row.key
        while key is not None:
            found.setdefault(key, Telemetry()).add(by_project[row.id])
            key = parents.get(key)
    return found


# Up to this many projects the query names them; beyond, it groups the cluster's rows and
# the projects are picked here (binding hundreds of ids cost more than the rows).
LISTED_PROJECTS = 100


def delivery_telemetry(*, rows: list, cluster, start: datetime, end: datetime) -> dict:
    """Telemetry per node of owed vs delivered's ``rows`` (``usage_by_tree_node``: the nodes
    the viewer wholly sees) on ``cluster`` over ``[start, end)``; one grouped query."""
    project_ids = [row.id for row in rows if row.kind == "project"]
    if not project_ids:
        return {}
    listed = project_ids if len(project_ids) <= LISTED_PROJECTS else None
    sums = telemetry_sums(cluster_ids=[cluster.pk], start=start, end=end, project_ids=listed)
    by_project = telemetry_by_project(sums, project_ids=project_ids)
    return telemetry_by_tree_node(rows, by_project)


def telemetry_days_and_projects(
    *, cluster_id: int, start: datetime, end: datetime
) -> tuple[dict[date, Telemetry], dict[int, Telemetry]]:
    """Telemetry of a cluster over the whole UTC days of ``[start, end)``, per day (all
    projects) and per project (all days), in one query over the day sums: a few hundred
    rows, not one per project and day. PostgreSQL groups both ways in one scan (GROUPING
    SETS); other databases join the two groupings by UNION ALL."""
    first, last = start.astimezone(UTC).date(), end.astimezone(UTC).date()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_GROUPING_SETS, [cluster_id, first, last])
            rows = cursor.fetchall()
    else:
        rows = _days_and_projects_union(cluster_id, first, last)
    days: dict[date, Telemetry] = {}
    projects: dict[int, Telemetry] = {}
    for day, project_id, allocated, busy in rows:
        telemetry = Telemetry(allocated or ZERO, busy or ZERO)
        if day is not None:
            days[_day(day)] = telemetry
        elif project_id is not None:
            projects[project_id] = telemetry
    return days, projects


_GROUPING_SETS = f"""
SELECT day, project_id, SUM(allocated_gpu_seconds), SUM(busy_gpu_seconds)
FROM {UtilizationDay._meta.db_table}
WHERE cluster_id = %s AND day >= %s AND day < %s AND allocated_gpu_seconds > 0
GROUP BY GROUPING SETS ((day), (project_id))
"""


def _days_and_projects_union(cluster_id: int, first: date, last: date):
    """``telemetry_days_and_projects``'s rows where GROUPING SETS is missing (SQLite)."""
    rows = UtilizationDay.objects.filter(
        cluster_id=cluster_id, day__gte=first, day__lt=last, allocated_gpu_seconds__gt=0
    ).order_by()
    sums = {"allocated": Sum("allocated_gpu_seconds"), "busy": Sum("busy_gpu_seconds")}
    per_day = (
        rows.values("day")
        .annotate(project=Value(None, output_field=BigIntegerField()), **sums)
        .values_list("day", "project", "allocated", "busy")
    )
    per_project = (
        rows.values("project_id")
        .annotate(bucket=Value(None, output_field=DateField()), **sums)
        .values_list("bucket", "project_id", "allocated", "busy")
    )
    return per_day.union(per_project, all=True)
