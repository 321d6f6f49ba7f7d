"""Cluster health, fourth level of the pyramid: utilization = busy ÷ allocated GPU time.

Busy and allocated GPU-seconds come from the node agents' telemetry
(``scheduler.models.UtilizationHour``, one grouped query per page:
``governance.selectors.telemetry``); GPU time without telemetry is left out of the ratio,
never counted as 0 % busy. How much of the allocated time was measured is said beside it:
**coverage** = allocated GPU-seconds with telemetry ÷ allocated GPU-seconds in the usage
ledger (its rollups: charged + free), capped at 100 % (the agents report the hour in
progress before accounting has charged it).

Visibility follows the health page's rule: per-day figures are cluster-wide sums, shown to
everyone who sees the cluster (no team's numbers can be read from them); the per-project
table and the idle runs list only the projects the viewer sees
(``Visibility.projects()``, the rule workload pages use).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db.models import F, Sum

from governance.models import Cluster, UsageDay
from governance.selectors.telemetry import Telemetry, telemetry_days_and_projects
from governance.selectors.usage_sources import kept_while_final, usage_sources
from scheduler.models import Run, UsageHour

ZERO = Decimal("0")
ONE = Decimal("1")
SECONDS_PER_HOUR = Decimal("3600")


def coverage_of(measured: Decimal, ledger: Decimal) -> Decimal | None:
    """Measured ÷ ledger allocated GPU-seconds, at most 1; ``None`` when the ledger has none."""
    if not ledger:
        return None
    return min(measured / ledger, ONE)


@dataclass
class UtilizationBucket:
    """Telemetry of a day, a project or the period beside the ledger's allocated time."""

    telemetry: Telemetry = field(default_factory=Telemetry)
    ledger_allocated_gpu_seconds: Decimal = ZERO

    @property
    def measured(self) -> bool:
        """Any telemetry at all."""
        return bool(self.telemetry.allocated_gpu_seconds)

    @property
    def utilization(self) -> Decimal | None:
        """Busy ÷ allocated of the measured time (0..1), ``None`` without telemetry."""
        return self.telemetry.utilization

    @property
    def coverage(self) -> Decimal | None:
        """Allocated GPU-seconds with telemetry ÷ those in the ledger (0..1)."""
        return coverage_of(self.telemetry.allocated_gpu_seconds, self.ledger_allocated_gpu_seconds)

    @property
    def ledger_allocated_gpu_hours(self) -> Decimal:
        """The ledger's allocated GPU-seconds in GPU-hours (for display)."""
        return self.ledger_allocated_gpu_seconds / SECONDS_PER_HOUR


@dataclass
class UtilizationDay(UtilizationBucket):
    """One UTC day of the cluster (all projects)."""

    day: date | None = None


@dataclass
class ProjectUtilization(UtilizationBucket):
    """One project the viewer sees, by id and name, with its program's name (the table's
    cells: 300 names read as tuples, not model instances)."""

    project_id: int = 0
    name: str = ""
    program: str = ""


@dataclass
class ClusterUtilization:
    """The utilization level of the health page for one cluster and period."""

    days: list[UtilizationDay]
    projects: list[ProjectUtilization]
    idle_runs: list[Run]
    total: UtilizationBucket

    @property
    def has_telemetry(self) -> bool:
        """Any GPU telemetry on the cluster in the period."""
        return self.total.measured


def _ledger_sums(cluster: Cluster, start: datetime, end: datetime) -> dict[int, Decimal]:
    """Charged + free GPU-seconds per project of the cluster from the usage rollups (the
    ledger's sums): whole days from the daily cache, the rest from the hourly rollup."""
    day_q, hour_q = usage_sources(cluster_ids=[cluster.pk], start=start, end=end)
    total = F("budgeted_gpu_seconds") + F("burst_gpu_seconds") + F("free_gpu_seconds")
    found: dict[int, Decimal] = {}
    for model, where in ((UsageDay, day_q), (UsageHour, hour_q)):
        if where is None:
            continue
        rows = model.objects.filter(where).order_by().values_list("project_id")
        for project_id, allocated in rows.annotate(allocated=Sum(total)):
            found[project_id] = found.get(project_id, ZERO) + (allocated or ZERO)
    return found


def _ledger_allocated_by_project(
    cluster: Cluster, start: datetime, end: datetime, project_ids: set[int]
) -> dict[int, Decimal]:
    """``_ledger_sums`` of ``project_ids``: the days before the last one kept while their
    usage is final (``kept_while_final``, every project of the cluster under one key, so
    every viewer shares it), the last day read every time."""
    split = max(start, end.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0))
    found = (
        kept_while_final(
            "health:ledger-by-project",
            cluster_ids=[cluster.pk],
            end=split,
            inputs=(start.timestamp(), split.timestamp()),
            make=lambda: _ledger_sums(cluster, start, split),
        )
        if split > start
        else {}
    )
    found = {pk: seconds for pk, seconds in found.items() if pk in project_ids}
    if split < end:
        for pk, seconds in _ledger_sums(cluster, split, end).items():
            if pk in project_ids:
                found[pk] = found.get(pk, ZERO) + seconds
    return found


def idle_runs_visible(*, visibility, cluster: Cluster) -> list[Run]:
    """Open runs of ``cluster`` the idle rule marked idle, of projects the viewer sees,
    longest idle first (workload and project selected for the links)."""
    return list(
        Run.objects.filter(
            cluster=cluster,
            ended_at__isnull=True,
            idle_since__isnull=False,
            project__in=visibility.projects(),
        )
        .select_related("workload", "project__program")
        .order_by("idle_since", "pk")
    )


def cluster_utilization(
    *,
    visibility,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    ledger_by_day: dict[date, Decimal],
) -> ClusterUtilization:
    """Utilization of ``cluster`` per UTC day and per visible project over the whole UTC
    days of ``[start, end)`` (one query over the day sums).

    ``ledger_by_day`` is the ledger's allocated GPU-seconds per day (the health pyramid's
    ``HealthDay.allocated_gpu_seconds``), the denominator of each day's coverage. The caller
    has checked that the viewer sees the cluster (``cluster_health``). Projects are those of
    ``visibility.projects()`` with telemetry or ledger time in the period, least busy
    (most idle GPU-hours) first; those without telemetry last.
    """
    by_day, by_all_projects = telemetry_days_and_projects(
        cluster_id=cluster.pk, start=start, end=end
    )
    days = {
        day: UtilizationDay(day=day, ledger_allocated_gpu_seconds=seconds)
        for day, seconds in ledger_by_day.items()
    }
    for day, telemetry in by_day.items():
        days.setdefault(day, UtilizationDay(day=day)).telemetry.add(telemetry)
    visible = {
        pk: (name, program)
        for pk, name, program in visibility.projects()
        .filter(program__organization_id=cluster.organization_id)
        .values_list("id", "name", "program__name")
    }
    by_project = {pk: t for pk, t in by_all_projects.items() if pk in visible}
    ledger = _ledger_allocated_by_project(cluster, start, end, set(visible))
    projects = [
        ProjectUtilization(
            telemetry=by_project.get(pk, Telemetry()),
            ledger_allocated_gpu_seconds=ledger.get(pk, ZERO),
            project_id=pk,
            name=visible[pk][0],
            program=visible[pk][1],
        )
        for pk in set(by_project) | {pk for pk, s in ledger.items() if s}
    ]
    projects.sort(
        key=lambda p: (
            not p.measured,
            -p.telemetry.idle_gpu_seconds,
            p.program,
            p.name,
        )
    )
    total = UtilizationBucket()
    for day in days.values():
        total.telemetry.add(day.telemetry)
        total.ledger_allocated_gpu_seconds += day.ledger_allocated_gpu_seconds
    return ClusterUtilization(
        days=[days[d] for d in sorted(days)],
        projects=projects,
        idle_runs=idle_runs_visible(visibility=visibility, cluster=cluster),
        total=total,
    )
