"""The finance usage report: GPU-hours budgeted, burst and free, and their cost.

Rows are per calendar month (clipped to the period) x node of the tree at the chosen level x
cluster, read from the hourly rollup ``scheduler.models.UsageHour`` (which sums the ledger
exactly). Every amount is an exact ``Decimal`` of GPU-seconds; GPU-hours are for display.
Cost = Σ over hours of GPU-hours used (budgeted + burst + free: the GPUs ran either way) x
the ``CostRate`` of the cluster's GPU type in force at the start of that hour, computed
exactly in the database and rounded to cents once per project, month and cluster; higher
levels and the totals add those rounded amounts, so every level sums exactly.

"Allocated but idle" GPU-seconds come from the agents' telemetry
(``governance.selectors.telemetry``): allocated minus busy of the measured hours per month,
project and cluster, ``None`` where nothing was measured (never 0 % busy). They are part of
the charged time above, not in addition to it: idle time is charged like any other.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import NamedTuple

from django.core.exceptions import PermissionDenied, ValidationError

from governance.models import Cluster, Organization, Program, Project
from governance.selectors.reports_costing import (
    RateSegment,
    as_instant,
    kept_monthly_sums,
    rate_segments,
)
from governance.selectors.telemetry import telemetry_sums
from governance.selectors.usage_scope import whole_organization_ids

ZERO = Decimal("0")
CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal("3600")
LEVELS = ("organization", "program", "project")
MAX_DAYS = 3 * 366


@dataclass
class ReportRow:
    """One line of the report: a node of the tree on one cluster in one period.

    ``period_end`` is the last day included. ``cost`` is ``None`` when no rate applied to any
    of the row's usage or the report mixes currencies; ``uncosted_gpu_seconds`` is the usage
    of hours with no rate in force.
    """

    period_start: date | None
    period_end: date | None
    level: str
    node_id: int | None
    organization: str
    program: str
    project: str
    cost_centre: str
    cluster_id: int | None
    cluster: str
    gpu_type: str
    budgeted_gpu_seconds: Decimal = ZERO
    burst_gpu_seconds: Decimal = ZERO
    free_gpu_seconds: Decimal = ZERO
    cost: Decimal | None = None
    uncosted_gpu_seconds: Decimal = ZERO
    # Allocated minus busy GPU-seconds of the hours the agents measured; None: no telemetry.
    idle_gpu_seconds: Decimal | None = None

    @property
    def idle_gpu_hours(self) -> Decimal | None:
        """Allocated but idle GPU-hours (telemetry); ``None`` when nothing was measured."""
        return None if self.idle_gpu_seconds is None else self.idle_gpu_seconds / SECONDS_PER_HOUR

    @property
    def total_gpu_seconds(self) -> Decimal:
        """Budgeted + burst + free: every GPU-second the ledger holds for this row."""
        return self.budgeted_gpu_seconds + self.burst_gpu_seconds + self.free_gpu_seconds

    @property
    def budgeted_gpu_hours(self) -> Decimal:
        return self.budgeted_gpu_seconds / SECONDS_PER_HOUR

    @property
    def burst_gpu_hours(self) -> Decimal:
        return self.burst_gpu_seconds / SECONDS_PER_HOUR

    @property
    def free_gpu_hours(self) -> Decimal:
        return self.free_gpu_seconds / SECONDS_PER_HOUR

    @property
    def total_gpu_hours(self) -> Decimal:
        return self.total_gpu_seconds / SECONDS_PER_HOUR

    @property
    def node_name(self) -> str:
        """The name of the row's node at its level."""
        return {"organization": self.organization, "program": self.program}.get(
            self.level, self.project
        )

    def add(self, other: ReportRow) -> None:
        """Add another row's amounts (a child's, or a row into the totals)."""
        self.budgeted_gpu_seconds += other.budgeted_gpu_seconds
        self.burst_gpu_seconds += other.burst_gpu_seconds
        self.free_gpu_seconds += other.free_gpu_seconds
        self.uncosted_gpu_seconds += other.uncosted_gpu_seconds
        if other.cost is not None:
            self.cost = (self.cost or ZERO) + other.cost
        if other.idle_gpu_seconds is not None:
            self.idle_gpu_seconds = (self.idle_gpu_seconds or ZERO) + other.idle_gpu_seconds


@dataclass
class UsageReport:
    """The report for one period: its rows, the totals and what the rows were made from.

    ``end`` is the last day included. ``currency`` is the rates' currency (``None`` when no
    rate applied, or ``"mixed"`` when the rates in force use several — then no cost is shown).
    """

    start: date
    end: date
    level: str
    cluster: Cluster | None
    program: Program | None
    rows: list[ReportRow]
    totals: ReportRow
    currency: str | None
    warnings: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        """ "GPU usage 2026-10" for a whole month, else "GPU usage 2026-10-03 to 2026-10-17"."""
        last = calendar.monthrange(self.start.year, self.start.month)[1]
        if self.start.day == 1 and self.end == self.start.replace(day=last):
            return f"GPU usage {self.start:%Y-%m}"
        return f"GPU usage {self.start:%Y-%m-%d} to {self.end:%Y-%m-%d}"


def report_period_of_month(month: date) -> tuple[date, date]:
    """The first and last day of ``month``'s calendar month."""
    first = month.replace(day=1)
    return first, first.replace(day=calendar.monthrange(first.year, first.month)[1])


def report_validate_period(*, start: date | None, end: date | None) -> None:
    """Refuse a period that is empty, reversed or longer than three years (names the field)."""
    if start is None:
        raise ValidationError({"start": ["Give the first day of the period (YYYY-MM-DD)."]})
    if end is None:
        raise ValidationError({"end": ["Give the last day of the period (YYYY-MM-DD)."]})
    if end < start:
        raise ValidationError({"end": [f"The last day ({end}) is before the first ({start})."]})
    if (end - start).days >= MAX_DAYS:
        raise ValidationError({"end": ["A report covers at most three years."]})


def usage_report(
    *,
    visibility,
    start: date,
    end: date,
    level: str = "project",
    cluster: Cluster | None = None,
    program: Program | None = None,
) -> UsageReport:
    """The finance usage report of the user's organizations from ``start`` to ``end`` (both
    days included, UTC), per month x node at ``level`` x cluster.

    Finance and org admins only (``PermissionDenied`` for anyone else). ``cluster`` and
    ``program`` narrow it; callers resolve them through the visibility selector (a hidden
    one is a 404 there); one outside the user's organizations raises ``PermissionDenied``
    here as a second line of defence. Only rows with usage are listed. Raises
    ``ValidationError`` naming ``start``, ``end`` or ``level`` for bad input. Four queries
    plus the visibility ones, one of them over the rollup and one over the telemetry
    (``ReportRow.idle_gpu_seconds``).
    """
    if not visibility.can_view_reports:
        raise PermissionDenied("Usage reports are for finance and org admins.")
    if level not in LEVELS:
        raise ValidationError({"level": [f"Must be one of {', '.join(LEVELS)}."]})
    report_validate_period(start=start, end=end)
    clusters, projects = _report_scope(visibility, cluster, program)
    begin, finish = as_instant(start), as_instant(end + timedelta(days=1))
    segments = rate_segments({c.gpu_type for c in clusters}, begin, finish)
    currency = _currency_of(segments)
    sums = kept_monthly_sums(clusters, projects, segments, begin, finish)
    leaf_rows = _leaf_rows(sums, projects, clusters, currency, start, end)
    _add_telemetry(leaf_rows, clusters, projects, begin, finish)
    rows = _roll_up(leaf_rows, level=level, projects=projects)
    totals = _totals(rows, start, end, cluster)
    warnings = _report_warnings(currency, totals)
    return UsageReport(
        start=start,
        end=end,
        level=level,
        cluster=cluster,
        program=program,
        rows=rows,
        totals=totals,
        currency=currency,
        warnings=warnings,
    )


def _currency_of(segments: dict[str, list[RateSegment]]) -> str | None:
    """The rates' one currency, ``"mixed"`` when they use several, None with no rate."""
    currencies = {s.currency for segs in segments.values() for s in segs}
    return None if not currencies else (currencies.pop() if len(currencies) == 1 else "mixed")


def _totals(rows: list[ReportRow], start: date, end: date, cluster: Cluster | None) -> ReportRow:
    """The report's totals: the sum of its rows."""
    totals = ReportRow(
        period_start=start,
        period_end=end,
        level="total",
        node_id=None,
        organization="",
        program="",
        project="",
        cost_centre="",
        cluster_id=cluster.pk if cluster else None,
        cluster=cluster.name if cluster else "",
        gpu_type=cluster.gpu_type if cluster else "",
    )
    for row in rows:
        totals.add(row)
    return totals


class _Scope(NamedTuple):
    """The clusters a report covers (by organization and name) and its projects by id."""

    clusters: list[Cluster]
    projects: dict[int, Project]


def _report_scope(visibility, cluster: Cluster | None, program: Program | None) -> _Scope:
    """The clusters and projects a report covers: the user's whole organizations, narrowed to
    ``cluster`` and ``program``; ``PermissionDenied`` for one outside them."""
    org_ids = whole_organization_ids(visibility)
    clusters = list(
        Cluster.objects.filter(organization_id__in=org_ids).order_by("organization_id", "name")
    )
    if cluster is not None:
        if cluster.organization_id not in org_ids:
            raise PermissionDenied("You cannot see this cluster's usage.")
        clusters = [c for c in clusters if c.pk == cluster.pk]
    projects = Project.objects.filter(program__organization_id__in=org_ids)
    if program is not None:
        if program.organization_id not in org_ids:
            raise PermissionDenied("You cannot see this program's usage.")
        projects = projects.filter(program_id=program.pk)
    projects = {p.pk: p for p in projects.select_related("program__organization").order_by("id")}
    return _Scope(clusters, projects)


def _leaf_rows(
    sums: dict[tuple, dict],
    projects: dict[int, Project],
    clusters: list[Cluster],
    currency: str | None,
    start: date,
    end: date,
) -> list[ReportRow]:
    """One row per (month, project, cluster) with usage, costed unless the currencies mix,
    in period, organization, program, project and cluster order."""
    cluster_by_id = {c.pk: c for c in clusters}
    leaf_rows: list[ReportRow] = []
    for (month, project_id, cluster_id), item in sums.items():
        item.setdefault("rated", None)
        item.update(month=month, project_id=project_id, cluster_id=cluster_id)
        if not (item["budgeted"] or item["burst"] or item["free"]):
            continue
        project = projects[item["project_id"]]
        the_cluster = cluster_by_id[item["cluster_id"]]
        last = report_period_of_month(month)[1]
        cost = None
        if item["rated"] is not None and currency != "mixed":
            cost = (item["rated"] / SECONDS_PER_HOUR).quantize(CENT, rounding=ROUND_HALF_EVEN)
        leaf_rows.append(
            ReportRow(
                period_start=max(month, start),
                period_end=min(last, end),
                level="project",
                node_id=project.pk,
                organization=project.program.organization.name,
                program=project.program.name,
                project=project.name,
                cost_centre=project.cost_centre,
                cluster_id=the_cluster.pk,
                cluster=the_cluster.name,
                gpu_type=the_cluster.gpu_type,
                budgeted_gpu_seconds=item["budgeted"] or ZERO,
                burst_gpu_seconds=item["burst"] or ZERO,
                free_gpu_seconds=item["free"] or ZERO,
                cost=cost,
                uncosted_gpu_seconds=item["uncosted"] or ZERO,
            )
        )
    leaf_rows.sort(
        key=lambda r: (r.period_start, r.organization, r.program, r.project, r.node_id, r.cluster)
    )
    return leaf_rows


def _add_telemetry(
    leaf_rows: list[ReportRow], clusters: list[Cluster], projects: dict, begin, finish
) -> None:
    """Set each leaf row's allocated-but-idle GPU-seconds from the agents' telemetry of its
    month, project and cluster (one grouped query; rows without telemetry keep ``None``)."""
    # A period inside one month (most reports) needs no month buckets: cheaper to group.
    one_month = (begin.year, begin.month) == (
        (finish - timedelta(days=1)).year,
        (finish - timedelta(days=1)).month,
    )
    sums = telemetry_sums(
        cluster_ids=[c.pk for c in clusters],
        start=begin,
        end=finish,
        per=None if one_month else "month",
    )
    for row in leaf_rows:
        month = None if one_month else row.period_start.replace(day=1)
        telemetry = sums.get((month, row.node_id, row.cluster_id))
        if telemetry is not None and row.node_id in projects:
            row.idle_gpu_seconds = telemetry.idle_gpu_seconds


def _report_warnings(currency: str | None, totals: ReportRow) -> list[str]:
    """What a reader must know about the costs: mixed currencies, hours with no rate."""
    warnings = []
    if currency == "mixed":
        warnings.append("The rates in force use several currencies: no cost is shown.")
    if totals.uncosted_gpu_seconds:
        hours = totals.uncosted_gpu_seconds / SECONDS_PER_HOUR
        warnings.append(f"{hours:,.1f} GPU-hours fall in hours with no cost rate: not costed.")
    return warnings


def _roll_up(leaf_rows: list[ReportRow], *, level: str, projects: dict) -> list[ReportRow]:
    """Project rows summed to ``level`` (same period and cluster), in the leaves' order."""
    if level == "project":
        return leaf_rows
    grouped: dict[tuple, ReportRow] = {}
    for leaf in leaf_rows:
        program = projects[leaf.node_id].program
        node: Organization | Program = program if level == "program" else program.organization
        key = (leaf.period_start, node.pk, leaf.cluster_id)
        row = grouped.get(key)
        if row is None:
            row = grouped[key] = ReportRow(
                period_start=leaf.period_start,
                period_end=leaf.period_end,
                level=level,
                node_id=node.pk,
                organization=leaf.organization,
                program=leaf.program if level == "program" else "",
                project="",
                cost_centre="",
                cluster_id=leaf.cluster_id,
                cluster=leaf.cluster,
                gpu_type=leaf.gpu_type,
            )
        row.add(leaf)
    return list(grouped.values())
