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

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db.models import Case, DecimalField, F, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Least, TruncDay, TruncHour

from governance.models import Cluster, Organization, Program, Project, UsageDay, UsageDayCursor
from scheduler.models import AccountingCursor, UsageHour

ZERO = Decimal("0")
SECONDS_PER_HOUR = Decimal("3600")

LEVELS = ("organization", "program", "project")
BUCKETS = ("hour", "day")
# Less accounted past than this and charts draw hours, not days (``first_accounted_hour``).
HOURLY_HISTORY_UNDER = timedelta(days=2)


def _hours(seconds: Decimal) -> Decimal:
    return seconds / SECONDS_PER_HOUR


@dataclass
class UsageRow:
    """Usage figures of one node of the tree over a period, on one cluster or summed over all.

    ``key`` is ``(kind, id)``; ``parent`` the parent's key (``None`` for an organization).
    Amounts are exact GPU-seconds (``Decimal``). A parent's amounts are the sums of its
    children's, exactly: ``owed_delivered`` and ``hourly_owed_delivered`` are summed per
    project first (min(charged, owed) over the period, resp. per hour), so a parent's
    delivery ratio is Σ min(charged, owed) ÷ Σ owed over its projects, as DESIGN defines the
    org-wide figure.
    """

    kind: str
    id: int
    name: str
    parent: tuple[str, int] | None
    cluster_id: int | None
    budgeted_gpu_seconds: Decimal = ZERO
    burst_gpu_seconds: Decimal = ZERO
    free_gpu_seconds: Decimal = ZERO
    entitled_gpu_seconds: Decimal = ZERO
    demand_gpu_seconds: Decimal = ZERO
    owed_gpu_seconds: Decimal = ZERO
    unbudgeted_gpu_seconds: Decimal = ZERO
    owed_delivered_gpu_seconds: Decimal = ZERO  # Σ projects min(charged, owed)
    hourly_owed_delivered_gpu_seconds: Decimal = ZERO  # Σ projects Σ hours min(charged, owed)

    @property
    def key(self) -> tuple[str, int]:
        """``(kind, id)``, unique across the three levels."""
        return (self.kind, self.id)

    @property
    def depth(self) -> int:
        """0 for an organization, 1 for a program, 2 for a project (for indenting)."""
        return LEVELS.index(self.kind)

    @property
    def charged_gpu_seconds(self) -> Decimal:
        """Budgeted + burst: what the node's workloads were charged (= delivered)."""
        return self.budgeted_gpu_seconds + self.burst_gpu_seconds

    @property
    def total_gpu_seconds(self) -> Decimal:
        """Every GPU-second used: budgeted + burst + free (what the ledger sums to)."""
        return self.budgeted_gpu_seconds + self.burst_gpu_seconds + self.free_gpu_seconds

    @property
    def delivery_ratio(self) -> Decimal | None:
        """Σ min(charged, owed) ÷ Σ owed over the node's projects; ``None`` when nothing owed."""
        if not self.owed_gpu_seconds:
            return None
        return self.owed_delivered_gpu_seconds / self.owed_gpu_seconds

    @property
    def hourly_delivery_ratio(self) -> Decimal | None:
        """Σ over hours min(charged, owed) ÷ Σ owed (no catch-up); ``None`` when nothing owed."""
        if not self.owed_gpu_seconds:
            return None
        return self.hourly_owed_delivered_gpu_seconds / self.owed_gpu_seconds

    # GPU-hours for display (seconds ÷ 3600; GPU-hours are not exact decimals).
    @property
    def owed_gpu_hours(self) -> Decimal:
        return _hours(self.owed_gpu_seconds)

    @property
    def charged_gpu_hours(self) -> Decimal:
        return _hours(self.charged_gpu_seconds)

    delivered_gpu_hours = charged_gpu_hours

    @property
    def budgeted_gpu_hours(self) -> Decimal:
        return _hours(self.budgeted_gpu_seconds)

    @property
    def burst_gpu_hours(self) -> Decimal:
        return _hours(self.burst_gpu_seconds)

    @property
    def free_gpu_hours(self) -> Decimal:
        return _hours(self.free_gpu_seconds)

    @property
    def unbudgeted_gpu_hours(self) -> Decimal:
        return _hours(self.unbudgeted_gpu_seconds)

    @property
    def entitled_gpu_hours(self) -> Decimal:
        return _hours(self.entitled_gpu_seconds)

    @property
    def total_gpu_hours(self) -> Decimal:
        return _hours(self.total_gpu_seconds)


@dataclass
class UsagePoint:
    """One bucket (hour or UTC day) of a node's usage for the time-series chart.

    ``delivered`` is charged (budgeted + burst). Exact GPU-seconds; ``*_gpu_hours`` for
    plotting.
    """

    start: datetime
    entitled_gpu_seconds: Decimal = ZERO
    owed_gpu_seconds: Decimal = ZERO
    delivered_gpu_seconds: Decimal = ZERO
    burst_gpu_seconds: Decimal = ZERO
    free_gpu_seconds: Decimal = ZERO
    demand_gpu_seconds: Decimal = ZERO

    @property
    def entitled_gpu_hours(self) -> Decimal:
        return _hours(self.entitled_gpu_seconds)

    @property
    def owed_gpu_hours(self) -> Decimal:
        return _hours(self.owed_gpu_seconds)

    @property
    def delivered_gpu_hours(self) -> Decimal:
        return _hours(self.delivered_gpu_seconds)

    @property
    def demand_gpu_hours(self) -> Decimal:
        return _hours(self.demand_gpu_seconds)


# --- What a user wholly sees ----------------------------------------------------------------


def whole_organization_ids(visibility) -> frozenset:
    """Organizations whose whole tree the user sees (org admin, finance)."""
    return visibility.admin_org_ids | visibility.finance_org_ids


def _wholly_visible(visibility):
    """(organizations, programs, projects) the user sees with their whole subtree."""
    org_ids = whole_organization_ids(visibility)
    organizations = list(Organization.objects.filter(id__in=org_ids).order_by("name", "id"))
    programs = list(
        Program.objects.filter(
            Q(organization_id__in=org_ids) | Q(id__in=visibility.managed_program_ids)
        ).order_by("name", "id")
    )
    projects = list(visibility.projects().order_by("name", "id"))
    return organizations, programs, projects


def node_wholly_visible(*, visibility, node) -> bool:
    """True when the user sees ``node`` and everything below it (so its totals are theirs)."""
    org_ids = whole_organization_ids(visibility)
    if isinstance(node, Organization):
        return node.pk in org_ids
    if isinstance(node, Program):
        return node.organization_id in org_ids or node.pk in visibility.managed_program_ids
    if isinstance(node, Project):
        return visibility.projects().filter(pk=node.pk).exists()
    return False


def _check_period(start: datetime, end: datetime) -> None:
    from django.core.exceptions import ValidationError

    if start.tzinfo is None or end.tzinfo is None:
        raise ValidationError({"start": ["Start and end must be aware datetimes."]})
    if end <= start:
        raise ValidationError({"end": ["End must be after start."]})


# --- Where the figures of a period are read from: the daily cache or the hourly rollup ------


def _midnight(day) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _ceil_day(at: datetime):
    at = at.astimezone(UTC)
    day = at.date()
    return day if at == _midnight(day) else day + timedelta(days=1)


def usage_sources(
    *, cluster_ids: list[int], start: datetime, end: datetime, split_days=None
) -> tuple[Q | None, Q | None]:
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
            add_hours(cluster_id, start, _midnight(first))
            day = first
            for split in sorted(d for d in split_days.get(cluster_id, ()) if first <= d < last):
                add_days(cluster_id, day, split)
                add_hours(cluster_id, _midnight(split), _midnight(split) + timedelta(days=1))
                day = split + timedelta(days=1)
            add_days(cluster_id, day, last)
            rest = _midnight(last)
        # The open day's cached hours, when what is left starts at its midnight and runs
        # past them (and the day is not one to read hour by hour).
        if (
            open_through is not None
            and rest == _midnight(until)
            and open_through <= end
            and until not in split_days.get(cluster_id, ())
        ):
            q = Q(cluster_id=cluster_id, day=until, through=open_through)
            day_q = q if day_q is None else day_q | q
            rest = open_through
        add_hours(cluster_id, rest, end)
    return day_q, hour_q


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


_DEC = DecimalField(max_digits=30, decimal_places=6)
_CHARGED = F("budgeted_gpu_seconds") + F("burst_gpu_seconds")
_OWED = Least(F("entitled_gpu_seconds"), F("demand_gpu_seconds"))

# The per-hour aggregates every usage figure is made of (all exact numeric in PostgreSQL).
HOUR_AGGREGATES = {
    "budgeted": Sum("budgeted_gpu_seconds"),
    "burst": Sum("burst_gpu_seconds"),
    "free": Sum("free_gpu_seconds"),
    "entitled": Sum("entitled_gpu_seconds"),
    "demand": Sum("demand_gpu_seconds"),
    "owed": Sum(_OWED, output_field=_DEC),
    "hourly_owed_delivered": Sum(Least(_CHARGED, _OWED), output_field=_DEC),
    # Charged time in hours with no entitlement: usage of a project with no share.
    "no_share_budgeted": Sum(
        Case(
            When(entitled_gpu_seconds=0, then=F("budgeted_gpu_seconds")),
            default=Value(ZERO),
            output_field=_DEC,
        )
    ),
}


def _add_project_sums(row: UsageRow, sums: dict) -> None:
    """Add one (project, cluster) aggregate to a row; min(charged, owed) is taken here."""
    budgeted = sums["budgeted"] or ZERO
    burst = sums["burst"] or ZERO
    free = sums["free"] or ZERO
    owed = sums["owed"] or ZERO
    row.budgeted_gpu_seconds += budgeted
    row.burst_gpu_seconds += burst
    row.free_gpu_seconds += free
    row.entitled_gpu_seconds += sums["entitled"] or ZERO
    row.demand_gpu_seconds += sums["demand"] or ZERO
    row.owed_gpu_seconds += owed
    row.unbudgeted_gpu_seconds += free + burst + (sums["no_share_budgeted"] or ZERO)
    row.owed_delivered_gpu_seconds += min(budgeted + burst, owed)
    row.hourly_owed_delivered_gpu_seconds += sums["hourly_owed_delivered"] or ZERO


_SUMMED_FIELDS = (
    "budgeted_gpu_seconds",
    "burst_gpu_seconds",
    "free_gpu_seconds",
    "entitled_gpu_seconds",
    "demand_gpu_seconds",
    "owed_gpu_seconds",
    "unbudgeted_gpu_seconds",
    "owed_delivered_gpu_seconds",
    "hourly_owed_delivered_gpu_seconds",
)


def _add_row(target: UsageRow, source: UsageRow) -> None:
    for name in _SUMMED_FIELDS:
        setattr(target, name, getattr(target, name) + getattr(source, name))


# Up to this many projects the rollup query names them; beyond, it groups every project of the
# clusters and the rows are filtered here (binding hundreds of ids cost more than the rows).
_LISTED_PROJECTS = 100


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
    organizations, programs, projects = _wholly_visible(visibility)
    cluster_id = cluster.pk if cluster is not None else None
    project_rows = {
        p.pk: UsageRow("project", p.pk, p.name, ("program", p.program_id), cluster_id)
        for p in projects
    }
    if cluster is not None:
        cluster_ids = [cluster.pk]
    else:
        cluster_ids = list(visibility.clusters().values_list("id", flat=True))
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
    for (project_id, _cluster_id), item in sums.items():
        _add_project_sums(project_rows[project_id], item)

    program_rows = {
        p.pk: UsageRow("program", p.pk, p.name, ("organization", p.organization_id), cluster_id)
        for p in programs
    }
    org_rows = {
        o.pk: UsageRow("organization", o.pk, o.name, None, cluster_id) for o in organizations
    }
    for row in project_rows.values():
        parent = program_rows.get(row.parent[1])
        if parent is not None:
            _add_row(parent, row)
    for row in program_rows.values():
        parent = org_rows.get(row.parent[1])
        if parent is not None:
            _add_row(parent, row)

    ordered: list[UsageRow] = []
    placed: set[tuple[str, int]] = set()
    projects_of: dict[int, list] = {}
    for project in projects:
        projects_of.setdefault(project.program_id, []).append(project)

    def place_program(program_row: UsageRow) -> None:
        ordered.append(program_row)
        placed.add(program_row.key)
        for project in projects_of.get(program_row.id, ()):
            ordered.append(project_rows[project.pk])
            placed.add(("project", project.pk))

    for org in organizations:
        ordered.append(org_rows[org.pk])
        for program in programs:
            if program.organization_id == org.pk:
                place_program(program_rows[program.pk])
    for program in programs:
        if ("program", program.pk) not in placed:
            place_program(program_rows[program.pk])
    for project in projects:
        if ("project", project.pk) not in placed:
            ordered.append(project_rows[project.pk])
    return ordered


def _subtree_projects(*, visibility, node) -> QuerySet[Project]:
    """Visible projects under ``node`` (all visible projects when ``node`` is None)."""
    projects = visibility.projects()
    if node is None:
        return projects
    if not node_wholly_visible(visibility=visibility, node=node):
        raise PermissionDenied("You cannot see all of this node's usage.")
    if isinstance(node, Organization):
        return projects.filter(program__organization_id=node.pk)
    if isinstance(node, Program):
        return projects.filter(program_id=node.pk)
    return projects.filter(pk=node.pk)


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
    from django.core.exceptions import ValidationError

    _check_period(start, end)
    if bucket not in BUCKETS:
        raise ValidationError({"bucket": [f"Must be one of {', '.join(BUCKETS)}."]})
    projects = _subtree_projects(visibility=visibility, node=node)
    if cluster is not None:
        cluster_ids = [cluster.pk]
    else:
        cluster_ids = list(visibility.clusters().values_list("id", flat=True))
    if bucket == "day":
        # Whole closed days from the daily cache, the rest from the hourly rows.
        day_q, hour_q = usage_sources(cluster_ids=cluster_ids, start=start, end=end)
        trunc = TruncDay("hour", tzinfo=UTC)
    else:
        day_q, hour_q = None, Q(cluster_id__in=cluster_ids, hour__gte=start, hour__lt=end)
        trunc = TruncHour("hour", tzinfo=UTC)
    found: dict[datetime, dict] = {}
    if day_q is not None:
        rows = (
            UsageDay.objects.filter(day_q, project_id__in=projects.values("id"))
            .order_by()
            .values("day")
            .annotate(
                entitled=Sum("entitled_gpu_seconds"),
                demand=Sum("demand_gpu_seconds"),
                owed=Sum("owed_gpu_seconds"),
                delivered=Sum(_CHARGED, output_field=_DEC),
                burst=Sum("burst_gpu_seconds"),
                free=Sum("free_gpu_seconds"),
            )
        )
        for item in rows:
            add_sums(found.setdefault(_midnight(item.pop("day")), {}), item)
    if hour_q is not None:
        rows = (
            UsageHour.objects.filter(hour_q, project_id__in=projects.values("id"))
            .annotate(bucket=trunc)
            .order_by()
            .values("bucket")
            .annotate(
                entitled=Sum("entitled_gpu_seconds"),
                demand=Sum("demand_gpu_seconds"),
                owed=Sum(_OWED, output_field=_DEC),
                delivered=Sum(_CHARGED, output_field=_DEC),
                burst=Sum("burst_gpu_seconds"),
                free=Sum("free_gpu_seconds"),
            )
        )
        for item in rows:
            add_sums(found.setdefault(item.pop("bucket").astimezone(UTC), {}), item)
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
