"""Owed vs delivered: usage figures per node of the budget tree, read from the hourly rollup.

Everything here reads ``scheduler.models.UsageHour`` (budgeted, burst, free, entitled and
demand GPU-seconds per cluster, project and UTC hour) and is scoped by the visibility
selector. Amounts are exact ``Decimal`` GPU-seconds as stored; the ``*_gpu_hours`` properties
divide by 3600 for display. Definitions (``docs/design.md``, "Words"):

- owed = Σ over hours of min(entitled, demand);
- charged (= delivered) = budgeted + burst (the free lane is not charged);
- burst = charged above entitlement in an hour (the ledger already splits it);
- unbudgeted = free + burst + charged time in hours where the project had no entitlement
  (a project with no share is charged as burst by the ledger, so this is free + burst for
  ledger-made data);
- delivery ratio = Σ over projects min(charged, owed) ÷ Σ owed (for one project:
  min(charged, owed) ÷ owed), ``None`` when owed is 0;
- hourly delivery ratio = Σ over projects and hours min(charged, owed) ÷ Σ owed.

Periods are the hours whose start lies in ``[start, end)``; pass whole UTC hours.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet, Sum
from django.db.models.functions import TruncDay, TruncHour

from governance.models import Cluster, Organization, Program, Project, UsageDay
from governance.selectors.usage_rows import (
    LEVELS,
    ZERO,
    UsagePoint,
    UsageRow,
    add_project_sums,
    add_row,
)
from governance.selectors.usage_scope import (
    WhollyVisible,
    node_wholly_visible,
    subtree_projects,
    whole_organization_ids,
    wholly_visible,
)
from governance.selectors.usage_sources import (
    CHARGED,
    DAY_AGGREGATES,
    EXACT_SECONDS,
    FINAL_FIGURE_SECONDS,
    HOUR_AGGREGATES,
    OWED,
    UsageSources,
    add_sums,
    final_usage_state,
    kept_while_final,
    midnight,
    usage_sources,
)
from scheduler.models import AccountingCursor, UsageHour

__all__ = [  # the rows and the sources are re-exported: callers import them from here
    "BUCKETS",
    "DAY_AGGREGATES",
    "FINAL_FIGURE_SECONDS",
    "HOURLY_HISTORY_UNDER",
    "HOUR_AGGREGATES",
    "LEVELS",
    "UsagePoint",
    "UsageRow",
    "UsageSources",
    "add_sums",
    "final_usage_state",
    "first_accounted_hour",
    "kept_while_final",
    "node_wholly_visible",
    "usage_by_tree_node",
    "usage_sources",
    "usage_timeseries",
    "whole_organization_ids",
]

BUCKETS = ("hour", "day")
# Less accounted past than this and charts draw hours, not days (``first_accounted_hour``).
HOURLY_HISTORY_UNDER = timedelta(days=2)


def _check_period(start: datetime, end: datetime) -> None:
    if start.tzinfo is None or end.tzinfo is None:
        raise ValidationError({"start": ["Start and end must be aware datetimes."]})
    if end <= start:
        raise ValidationError({"end": ["End must be after start."]})


def _cluster_ids(visibility, cluster: Cluster | None) -> list[int]:
    """``cluster``'s id, or every cluster the user sees when ``cluster`` is None."""
    if cluster is not None:
        return [cluster.pk]
    return list(visibility.clusters().values_list("id", flat=True))


# --- Owed vs delivered per node of the tree --------------------------------------------------

# Up to this many projects the rollup query names them; beyond, it groups every project of the
# clusters and the rows are filtered here (binding hundreds of ids cost more than the rows).
_LISTED_PROJECTS = 100


class _NodeRows(NamedTuple):
    """The rows of each level keyed by id."""

    organizations: dict[int, UsageRow]
    programs: dict[int, UsageRow]
    projects: dict[int, UsageRow]


def _project_sums(
    project_rows: dict[int, UsageRow], cluster_ids: list[int], start: datetime, end: datetime
) -> dict[tuple[int, int], dict]:
    """The aggregates of each (project, cluster) over ``[start, end)``, for the projects of
    ``project_rows`` only: one grouped query over the daily cache, one over the hourly rows."""
    day_q, hour_q = usage_sources(cluster_ids=cluster_ids, start=start, end=end)
    sums: dict[tuple[int, int], dict] = {}
    for model, where, aggregates in (
        (UsageDay, day_q, DAY_AGGREGATES),
        (UsageHour, hour_q, HOUR_AGGREGATES),
    ):
        if where is None:
            continue
        rows = model.objects.filter(where)
        if len(project_rows) <= _LISTED_PROJECTS:
            rows = rows.filter(project_id__in=list(project_rows))
        rows = rows.order_by().values("project_id", "cluster_id").annotate(**aggregates)
        for item in rows:
            key = (item.pop("project_id"), item.pop("cluster_id"))
            if key[0] in project_rows:  # only the projects the user wholly sees
                add_sums(sums.setdefault(key, {}), item)
    return sums


def _summed_tree(
    wholly: WhollyVisible, project_rows: dict[int, UsageRow], cluster_id: int | None
) -> _NodeRows:
    """The program and organization rows, each the exact sum of its visible children's."""
    program_rows = {
        p.pk: UsageRow("program", p.pk, p.name, ("organization", p.organization_id), cluster_id)
        for p in wholly.programs
    }
    org_rows = {
        o.pk: UsageRow("organization", o.pk, o.name, None, cluster_id) for o in wholly.organizations
    }
    for row in project_rows.values():
        parent = program_rows.get(row.parent[1])
        if parent is not None:
            add_row(parent, row)
    for row in program_rows.values():
        parent = org_rows.get(row.parent[1])
        if parent is not None:
            add_row(parent, row)
    return _NodeRows(org_rows, program_rows, project_rows)


def _depth_first(wholly: WhollyVisible, rows: _NodeRows) -> list[UsageRow]:
    """Each organization, then each of its programs followed by the program's projects; then
    the programs and projects whose parent the user does not wholly see (by name)."""
    organizations, programs, projects = wholly
    ordered: list[UsageRow] = []
    placed: set[tuple[str, int]] = set()
    projects_of: dict[int, list] = {}
    for project in projects:
        projects_of.setdefault(project.program_id, []).append(project)

    def place_program(program_row: UsageRow) -> None:
        ordered.append(program_row)
        placed.add(program_row.key)
        for project in projects_of.get(program_row.id, ()):
            ordered.append(rows.projects[project.pk])
            placed.add(("project", project.pk))

    for org in organizations:
        ordered.append(rows.organizations[org.pk])
        for program in programs:
            if program.organization_id == org.pk:
                place_program(rows.programs[program.pk])
    for program in programs:
        if ("program", program.pk) not in placed:
            place_program(rows.programs[program.pk])
    for project in projects:
        if ("project", project.pk) not in placed:
            ordered.append(rows.projects[project.pk])
    return ordered


def usage_by_tree_node(
    *, visibility, cluster: Cluster | None, start: datetime, end: datetime
) -> list[UsageRow]:
    """One row per node of the tree the user wholly sees, depth-first, with usage figures.

    ``cluster`` None sums every visible cluster (``cluster_id`` None on the rows); a
    project's min(charged, owed) is then taken per cluster and summed (delivery on one
    cluster does not make up for another). A node is a row only when the user sees its
    whole subtree (org admin/finance: the organization and below; program manager: their
    program and its projects; PI/researcher: their project), so every parent row is the
    exact sum of its children's rows. Projects with no usage in the period still get a
    (zero) row. Order: each organization, then each of its programs followed by the
    program's projects (by name). A few queries, one of them over the rollup.
    """
    _check_period(start, end)
    wholly = wholly_visible(visibility)
    cluster_id = cluster.pk if cluster is not None else None
    project_rows = {
        p.pk: UsageRow("project", p.pk, p.name, ("program", p.program_id), cluster_id)
        for p in wholly.projects
    }
    sums = _project_sums(project_rows, _cluster_ids(visibility, cluster), start, end)
    for (project_id, _cluster_id), item in sums.items():
        add_project_sums(project_rows[project_id], item)
    return _depth_first(wholly, _summed_tree(wholly, project_rows, cluster_id))


# --- Owed vs delivered over time -------------------------------------------------------------


def _bucket_starts(start: datetime, end: datetime, bucket: str) -> list[datetime]:
    step = timedelta(hours=1) if bucket == "hour" else timedelta(days=1)
    first = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    if bucket == "day":
        first = first.replace(hour=0)
    starts = []
    at = first
    while at < end:
        starts.append(at)
        at += step
    return starts


class _SeriesSources(NamedTuple):
    """What a time series reads: the daily cache's rows, the hourly rows and how the hourly
    rows are bucketed."""

    days: Q | None
    hours: Q | None
    trunc: TruncDay | TruncHour


def _series_sources(
    cluster_ids: list[int], start: datetime, end: datetime, bucket: str
) -> _SeriesSources:
    """Day buckets: whole closed days from the daily cache, the rest from the hourly rows;
    hour buckets: the hourly rows only."""
    if bucket == "day":
        day_q, hour_q = usage_sources(cluster_ids=cluster_ids, start=start, end=end)
        return _SeriesSources(day_q, hour_q, TruncDay("hour", tzinfo=UTC))
    hour_q = Q(cluster_id__in=cluster_ids, hour__gte=start, hour__lt=end)
    return _SeriesSources(None, hour_q, TruncHour("hour", tzinfo=UTC))


def _bucket_sums(sources: _SeriesSources, projects: QuerySet[Project]) -> dict[datetime, dict]:
    """Entitled, demand, owed, delivered, burst and free GPU-seconds per bucket start (one
    grouped query per source); buckets with no rows are absent."""
    found: dict[datetime, dict] = {}
    if sources.days is not None:
        rows = (
            UsageDay.objects.filter(sources.days, project_id__in=projects.values("id"))
            .order_by()
            .values("day")
            .annotate(
                entitled=Sum("entitled_gpu_seconds"),
                demand=Sum("demand_gpu_seconds"),
                owed=Sum("owed_gpu_seconds"),
                delivered=Sum(CHARGED, output_field=EXACT_SECONDS),
                burst=Sum("burst_gpu_seconds"),
                free=Sum("free_gpu_seconds"),
            )
        )
        for item in rows:
            add_sums(found.setdefault(midnight(item.pop("day")), {}), item)
    if sources.hours is not None:
        rows = (
            UsageHour.objects.filter(sources.hours, project_id__in=projects.values("id"))
            .annotate(bucket=sources.trunc)
            .order_by()
            .values("bucket")
            .annotate(
                entitled=Sum("entitled_gpu_seconds"),
                demand=Sum("demand_gpu_seconds"),
                owed=Sum(OWED, output_field=EXACT_SECONDS),
                delivered=Sum(CHARGED, output_field=EXACT_SECONDS),
                burst=Sum("burst_gpu_seconds"),
                free=Sum("free_gpu_seconds"),
            )
        )
        for item in rows:
            add_sums(found.setdefault(item.pop("bucket").astimezone(UTC), {}), item)
    return found


def _points(
    found: dict[datetime, dict], start: datetime, end: datetime, bucket: str
) -> list[UsagePoint]:
    """One point per bucket of ``[start, end)``, zeros where nothing was found."""
    points = []
    for at in _bucket_starts(start, end, bucket):
        item = found.get(at)
        point = UsagePoint(start=at)
        if item:
            point.entitled_gpu_seconds = item["entitled"] or ZERO
            point.demand_gpu_seconds = item["demand"] or ZERO
            point.owed_gpu_seconds = item["owed"] or ZERO
            point.delivered_gpu_seconds = item["delivered"] or ZERO
            point.burst_gpu_seconds = item["burst"] or ZERO
            point.free_gpu_seconds = item["free"] or ZERO
        points.append(point)
    return points


def usage_timeseries(
    *,
    visibility,
    cluster: Cluster | None,
    start: datetime,
    end: datetime,
    node: Organization | Program | Project | None = None,
    bucket: str = "hour",
) -> list[UsagePoint]:
    """Delivered (charged) vs entitled vs owed of ``node`` per hour or UTC day, oldest first.

    ``node`` None: every project the user sees. A node the user cannot wholly see raises
    ``PermissionDenied`` (views resolve it through the visibility selector first: a 404).
    Owed per bucket = Σ over projects and hours of min(entitled, demand). Buckets with no
    rollup rows are filled with zeros, so the x axis is continuous. Day buckets read closed
    days from the daily cache (``UsageDay``). One or two queries.
    """
    _check_period(start, end)
    if bucket not in BUCKETS:
        raise ValidationError({"bucket": [f"Must be one of {', '.join(BUCKETS)}."]})
    projects = subtree_projects(visibility=visibility, node=node)
    sources = _series_sources(_cluster_ids(visibility, cluster), start, end, bucket)
    return _points(_bucket_sums(sources, projects), start, end, bucket)


def first_accounted_hour(*, cluster: Cluster, until: datetime) -> datetime | None:
    """The UTC hour accounting of ``cluster`` began in, when that was under two days before
    ``until`` (a new installation); None otherwise, or before any accounting.

    Charts over such a short past draw hours, not days: daily points would be one or two
    dots. One rule for every chart that has to choose.
    """
    began = (
        AccountingCursor.objects.filter(cluster=cluster)
        .values_list("accounted_from", flat=True)
        .first()
    )
    if began is None or until - began >= HOURLY_HISTORY_UNDER:
        return None
    return began.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
