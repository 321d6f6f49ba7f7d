"""Cluster health — the metrics pyramid (``docs/design.md``): availability, occupancy, impact per day.

Read from the usage rollups (closed days from the daily cache ``governance.models.UsageDay``,
the rest from the hourly ``scheduler.models.UsageHour``, split by
``governance.selectors.usage_sources.usage_sources``), the share history and the live node states;
no ledger scans. Per UTC day of a period:

- **availability** = healthy GPU-seconds ÷ (GPUs x seconds). The rollups do not store
  healthy GPUs, but accounting wrote ``entitled = effective share x healthy GPUs x seconds``
  for every budgeted project, so healthy GPU-seconds = Σ entitled ÷ Σ effective shares in
  force (from the allocation history; a day when that sum changed is read hour by hour).
  A day with no entitlement at all (nothing budgeted, or accounting not running) is
  *unknown*; otherwise the whole day (from when accounting began, up to how far it got
  today) is measured, so hours when accounting stopped count as unavailable.
- **occupancy** = allocated ÷ healthy GPU-seconds, where allocated = budgeted + burst + free
  (everything that ran), at most 100 %: while a draining node still runs work, that work is
  allocated but the node's capacity no longer counts as healthy, and a day of a drain on a
  full cluster would otherwise read a little over 100 %.
- **impact** = the organization's delivery ratio for that day, Σ over projects of
  min(charged, owed) ÷ Σ owed (owed = Σ over hours of min(entitled, demand)); the stricter
  hourly ratio is given beside it.

These are cluster-wide figures (no team's numbers can be read from them), shown to everyone
who sees the cluster. Node states are the current ones (``Node.state``); the models keep no
history of state changes, so past availability comes from the rollup as above, drains in
progress from ``Node.state_changed_at``, and finished drains from the scheduling cycles that
reported them (``SchedulingCycle.drained_nodes``) with the evictions the drain ordered.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import Count, F, Sum
from django.db.models.functions import Least, TruncDay
from django.utils import timezone

from governance.models import Cluster, UsageDay
from governance.selectors.tree import ShareRow, pick_shares, share_rows
from governance.selectors.usage_sources import kept_while_final, usage_sources
from scheduler.choices import NodeState, RunEndReason
from scheduler.models import AccountingCursor, Node, RunNode, SchedulingCycle, UsageHour
from scheduler.selectors.protection import drain_due_at

ZERO = Decimal("0")
HUNDRED = Decimal("100")
MILLI = Decimal("0.001")
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# A drain evicts each run once its minimum runtime (at most 8 h) has passed.
MAX_DRAIN = timedelta(hours=8, minutes=30)
NODE_STATE_ORDER = [NodeState.HEALTHY, NodeState.DRAINING, NodeState.DRAINED, NodeState.DOWN]


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


@dataclass
class NodeStateCount:
    """Nodes and GPUs of the cluster in one state, now."""

    state: str
    label: str
    nodes: int
    gpus: int


@dataclass
class DrainInProgress:
    """A draining node: since when, who asked, why, and the work still on it.

    ``protected_until`` is when the last run on it passes its minimum runtime (capped as the
    engine caps it: ``scheduler.selectors.protection.drain_due_at``) — the latest moment the
    drain evicts it (runs that end earlier leave earlier).
    """

    node: Node
    since: datetime | None
    by: object
    reason: str
    running: int
    gpus_in_use: int
    protected_until: datetime | None


@dataclass
class FinishedDrain:
    """A node that became drained in the period.

    The request time is not recorded (``Node.state_changed_at`` is overwritten when the node
    becomes drained), so ``first_eviction`` — the first stop the drain ordered on the node —
    is the earliest known moment; ``duration`` runs from it to ``drained_at`` (``None`` when
    the node had nothing to evict).
    """

    node_name: str
    drained_at: datetime
    evictions: int
    first_eviction: datetime | None

    @property
    def duration(self) -> timedelta | None:
        """Time from the first eviction to drained (``None`` with no eviction)."""
        if self.first_eviction is None:
            return None
        return self.drained_at - self.first_eviction

    @property
    def duration_label(self) -> str:
        """The duration as "2 h 05 min" (or "45 min"); "—" with no eviction."""
        if self.duration is None:
            return "—"
        minutes = int(self.duration.total_seconds() // 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


@dataclass
class ClusterHealth:
    """Everything the health page shows for one cluster and period."""

    cluster: Cluster
    start: datetime
    end: datetime
    gpus: int
    days: list[HealthDay]
    nodes_by_state: list[NodeStateCount]
    drains_in_progress: list[DrainInProgress]
    finished_drains: list[FinishedDrain] = field(default_factory=list)

    @property
    def totals(self) -> HealthDay:
        """The whole period as one bucket (ratios of the sums, not means of ratios)."""
        total = HealthDay(day=self.start)
        for day in self.days:
            for name in (
                "capacity_gpu_seconds",
                "healthy_gpu_seconds",
                "allocated_gpu_seconds",
                "allocated_known_gpu_seconds",
                "charged_gpu_seconds",
                "free_gpu_seconds",
                "owed_gpu_seconds",
                "owed_delivered_gpu_seconds",
                "hourly_owed_delivered_gpu_seconds",
            ):
                setattr(total, name, getattr(total, name) + getattr(day, name))
            total.known_hours += day.known_hours
        return total

    @property
    def has_usage_data(self) -> bool:
        """Any rollup figure in the period at all."""
        return any(
            d.known_hours or d.allocated_gpu_seconds or d.owed_gpu_seconds for d in self.days
        )


def _effective_share_steps(
    cluster: Cluster, start: datetime, end: datetime, rows: list[ShareRow] | None = None
) -> tuple[list[datetime], list[Decimal]]:
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
    return instants, sums


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
    instants, sums = _effective_share_steps(cluster, start, end, rows)
    # A change of the budgeted total inside a day: that day is read hour by hour.
    split = {t.date() for t in instants[1:] if t != t.replace(hour=0, minute=0, second=0)}
    day_q, hour_q = usage_sources(
        cluster_ids=[cluster.pk], start=start, end=end, split_days={cluster.pk: split}
    )
    first_day = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days: dict[datetime, HealthDay] = {}
    cursor = first_day
    while cursor < end:
        days[cursor] = HealthDay(day=cursor)
        cursor += DAY

    def effective_at(t: datetime) -> Decimal:
        return sums[max(bisect_right(instants, t) - 1, 0)]

    def effective_over(hour: datetime) -> Decimal:
        """The budgeted total averaged over the seconds of ``hour`` that were accounted:
        entitlement was written at the shares in force each second, so a share changed
        mid-hour must weigh each part by its seconds (not take the total at the hour's
        start, which made availability pass 100 %)."""
        a = max(hour, measured_from or hour)
        b = min(hour + HOUR, measured_until)
        if b <= a:
            return effective_at(hour)
        i = max(bisect_right(instants, a) - 1, 0)
        t, weighted = a, ZERO
        while t < b:
            step_end = min(instants[i + 1], b) if i + 1 < len(instants) else b
            weighted += sums[i] * Decimal(str((step_end - t).total_seconds()))
            t, i = step_end, i + 1
        return weighted / Decimal(str((b - a).total_seconds()))

    def add_healthy(day: HealthDay, entitled: Decimal, effective: Decimal) -> None:
        if entitled > 0 and effective > 0:
            # Entitlement is stored to the microsecond, rounded down per record; read back
            # through the share it is off by a few millionths of a GPU-second (and a day of
            # healthy nodes read 99.99999 %): healthy time is whole milli-GPU-seconds.
            healthy = (entitled * HUNDRED / effective).quantize(MILLI)
            day.healthy_gpu_seconds += healthy
            day.entitled_seen = True

    if day_q is not None:
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
            add_healthy(day, row["entitled"] or ZERO, effective_at(at))
    if hour_q is not None:
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
        for hour, entitled in hours.values_list("hour").annotate(
            entitled=Sum("entitled_gpu_seconds")
        ):
            hour = hour.astimezone(UTC)
            day = days.get(hour.replace(hour=0))
            if day is not None:
                add_healthy(day, entitled or ZERO, effective_over(hour))
    for at, day in days.items():
        if not day.entitled_seen:
            continue  # nothing budgeted or nothing accounted: health unknown that day
        begin = max(at, start, measured_from or start)
        seconds = (min(at + DAY, measured_until, end) - begin).total_seconds()
        if seconds > 0:
            day.known_hours = math.ceil(seconds / 3600)
            day.capacity_gpu_seconds = Decimal(gpus) * Decimal(str(seconds))
            day.allocated_known_gpu_seconds = day.allocated_gpu_seconds
    return list(days.values())


def _pyramid_days_kept(
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


def _drains_in_progress(cluster: Cluster) -> list[DrainInProgress]:
    """Draining nodes with the runs still on them and when the last one may be evicted."""
    draining = list(
        Node.objects.filter(cluster=cluster, state=NodeState.DRAINING)
        .select_related("state_changed_by")
        .order_by("state_changed_at", "name")
    )
    if not draining:
        return []
    on_nodes: dict[int, list[RunNode]] = defaultdict(list)
    for run_node in RunNode.objects.filter(
        node__in=draining, run__ended_at__isnull=True
    ).select_related("run__workload"):
        on_nodes[run_node.node_id].append(run_node)
    drains = []
    for node in draining:
        runs = on_nodes.get(node.id, [])
        ends = [
            due
            for rn in runs
            if (
                due := drain_due_at(
                    started_at=rn.run.started_at,
                    min_runtime_seconds=rn.run.workload.min_runtime_seconds,
                )
            )
            is not None
        ]
        drains.append(
            DrainInProgress(
                node=node,
                since=node.state_changed_at,
                by=node.state_changed_by,
                reason=node.state_reason,
                running=len(runs),
                gpus_in_use=sum(rn.gpus for rn in runs),
                protected_until=max(ends) if ends else None,
            )
        )
    return drains


def _finished_drains(cluster: Cluster, start: datetime, end: datetime) -> list[FinishedDrain]:
    """Nodes the scheduling cycles reported drained in ``[start, end)``, newest first."""
    cycles = (
        SchedulingCycle.objects.filter(cluster=cluster, started_at__gte=start, started_at__lt=end)
        .exclude(drained_nodes=[])
        .order_by("started_at")
        .values_list("started_at", "drained_nodes")
    )
    events = [(at, name) for at, names in cycles for name in names]
    if not events:
        return []
    names = {name for _, name in events}
    evictions = defaultdict(list)
    for node_name, stopped_at in (
        RunNode.objects.filter(
            node__cluster=cluster,
            node__name__in=names,
            run__stop_reason=RunEndReason.DRAINED,
            run__stop_requested_at__gte=start - MAX_DRAIN,
            run__stop_requested_at__lt=end,
        )
        .values_list("node__name", "run__stop_requested_at")
        .order_by("run__stop_requested_at")
    ):
        evictions[node_name].append(stopped_at)
    finished = []
    previous: dict[str, datetime] = {}
    for drained_at, name in events:
        since = max(previous.get(name, drained_at - MAX_DRAIN), drained_at - MAX_DRAIN)
        mine = [t for t in evictions.get(name, []) if since < t <= drained_at]
        finished.append(
            FinishedDrain(
                node_name=name,
                drained_at=drained_at,
                evictions=len(mine),
                first_eviction=mine[0] if mine else None,
            )
        )
        previous[name] = drained_at
    finished.reverse()
    return finished


def cluster_health(
    *, visibility, cluster: Cluster, start: datetime, end: datetime, now: datetime | None = None
) -> ClusterHealth:
    """The metrics pyramid of ``cluster`` per UTC day of ``[start, end)``, nodes and drains now.

    The caller resolves ``cluster`` through ``visibility.clusters()`` first (a 404 for a
    cluster the user cannot see); ``visibility`` is checked again here and an invisible
    cluster raises ``PermissionDenied``. ``end`` is clipped to the end of the current hour.
    A fixed number of queries, independent of the number of projects and days.
    """
    from django.core.exceptions import PermissionDenied

    if not visibility.clusters().filter(pk=cluster.pk).exists():
        raise PermissionDenied("You cannot see this cluster.")
    now = now or timezone.now()
    end = min(end, now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + HOUR)
    states = {
        row["state"]: row
        for row in Node.objects.filter(cluster=cluster)
        .values("state")
        .annotate(nodes=Count("id"), gpus=Sum("gpus"))
    }
    node_gpus = sum(row["gpus"] or 0 for row in states.values())
    accounted = (
        AccountingCursor.objects.filter(cluster=cluster)
        .values_list("accounted_from", "accounted_until")
        .first()
    )
    measured_from, accounted_until = accounted or (None, None)
    measured = min(accounted_until or now, now)
    gpus = node_gpus or cluster.total_gpus
    nodes_by_state = [
        NodeStateCount(
            state=state.value,
            label=state.label,
            nodes=states.get(state.value, {}).get("nodes", 0),
            gpus=states.get(state.value, {}).get("gpus", 0) or 0,
        )
        for state in NODE_STATE_ORDER
    ]
    return ClusterHealth(
        cluster=cluster,
        start=start,
        end=end,
        gpus=gpus,
        days=_pyramid_days_kept(cluster, start, end, gpus, measured, measured_from)
        if start < end
        else [],
        nodes_by_state=nodes_by_state,
        drains_in_progress=_drains_in_progress(cluster),
        finished_drains=_finished_drains(cluster, start, end) if start < end else [],
    )
