"""Usage back from KAI Scheduler: allocated GPUs per queue (Prometheus) → the usage ledger.

KAI's queue controller exports ``kai_queue_allocated_gpus{queue_name=…}`` (a gauge: GPUs,
fractions allowed, held by the running pods of the queue and its children;
``pkg/queuecontroller/metrics/metrics.go``; ``kai`` is the default ``--metrics-namespace``).
KAI's own time-based fair share reads the same metric back from Prometheus
(``pkg/scheduler/cache/usagedb/prometheus``).

The import reads it with a range query at ``step`` seconds over whole, closed UTC hours. A
sample at t stands for ``[t, t + step)``. Leaf queues are mapped back to projects by the
queue names ``kai_queues`` generates (``queues.queue_names``); parent queues are skipped (their
value includes their children's); any other queue (KAI's ``default-queue``, queues of other
tools) is reported and not charged. Each (queue, hour) is one external job of the ledger —
``source="kai"``, ``external_id="<queue>@<hour>"`` — charged through
``scheduler.services.usage_external.usage_external_record`` (budgeted up to the entitlement the
project accrued in the hour, burst above it), so a re-import of the same hours writes nothing.

Owed needs demand (GPUs asked for, pending and running), which KAI does not export per queue.
With ``demand_query`` — a PromQL expression giving GPUs requested per ``queue_name`` (e.g.
from kube-state-metrics, docs/kubernetes.md) — the import also appends entitlement and demand
through ``usage_external_entitlement`` (from the cluster's accounting cursor, first set to
``since``), so owed and delivery ratios work as for the live loop. Without it, charged
GPU-hours appear on every page but owed stays 0.

The ledger counts whole GPUs; a fractional allocation (KAI's GPU sharing: 0.5 GPU for 60 s)
is charged as the same GPU-seconds on whole GPUs over a shorter interval (1 GPU for 30 s),
exact to the microsecond.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from governance.models import Cluster, Project
from scheduler.adapters.kai.prometheus import Series, prometheus_query_range
from scheduler.adapters.kai.queues import queue_names
from scheduler.adapters.kai.tree import kai_tree_read
from scheduler.models import AccountingCursor
from scheduler.services.usage import gpu_seconds
from scheduler.services.usage_external import (
    UNCHANGED,
    DemandInterval,
    usage_external_entitlement,
    usage_external_record,
)

SOURCE = "kai"
DEFAULT_METRIC = "kai_queue_allocated_gpus"
QUEUE_LABEL = "queue_name"
HOUR = timedelta(hours=1)
MAX_RANGE = timedelta(days=90)
ZERO = Decimal("0")
NO_LABEL = "(no queue_name label)"


@dataclass(frozen=True)
class Piece:
    """``gpus`` whole GPUs over ``[start, end)``: one call of the external usage service."""

    start: datetime
    end: datetime
    gpus: int

    @property
    def gpu_seconds(self) -> Decimal:
        """GPUs x duration, exact to the microsecond (the ledger's own rule)."""
        return gpu_seconds(self.gpus, self.start, self.end)


@dataclass
class KaiImportResult:
    """What an import did: per queue GPU-seconds charged now, and what it did not charge.

    ``charged`` holds GPU-seconds added by this run per leaf queue; ``already`` counts pieces
    the ledger held already (a re-import); ``unknown`` holds the GPU-seconds seen on queues
    that are not in the tree (not charged); ``parents`` the tree's parent queues seen.
    """

    since: datetime
    until: datetime
    charged: dict[str, Decimal] = field(default_factory=dict)
    rows: int = 0
    already: int = 0
    unknown: dict[str, Decimal] = field(default_factory=dict)
    parents: set[str] = field(default_factory=set)
    entitlement_rows: int = 0

    @property
    def total_gpu_seconds(self) -> Decimal:
        """GPU-seconds this run added to the ledger."""
        return sum(self.charged.values(), ZERO)


def floor_hour(at: datetime) -> datetime:
    """``at`` rounded down to the whole UTC hour."""
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def allocation_pieces(
    samples: list[tuple[datetime, Decimal]], *, step_seconds: int, since: datetime, until: datetime
) -> dict[datetime, list[Piece]]:
    """Samples of one queue as pieces of whole GPUs, per UTC hour (pure; no I/O).

    A sample at t covers ``[t, t + step)`` clipped to ``[since, until)``; equal neighbours in
    the same hour merge into one piece; zero and negative values are not pieces. A fractional
    value v over d seconds becomes ``ceil(v)`` GPUs over ``d x v / ceil(v)`` (same GPU-seconds).
    Steps divide the hour, so no sample straddles an hour boundary.
    """
    step = timedelta(seconds=step_seconds)
    runs: dict[datetime, list[list]] = defaultdict(list)
    for at, value in samples:
        start, end = max(at, since), min(at + step, until)
        if start >= end or value <= 0:
            continue
        hour = floor_hour(start)
        hour_runs = runs[hour]
        if hour_runs and hour_runs[-1][1] == start and hour_runs[-1][2] == value:
            hour_runs[-1][1] = end
        else:
            hour_runs.append([start, end, value])
    pieces: dict[datetime, list[Piece]] = {}
    for hour, hour_runs in sorted(runs.items()):
        pieces[hour] = []
        for start, end, value in hour_runs:
            gpus = math.ceil(value)
            if value != gpus:
                micros = int((end - start) / timedelta(microseconds=1))
                end = start + timedelta(microseconds=round(micros * value / gpus))
            if end > start:
                pieces[hour].append(Piece(start, end, gpus))
    return pieces


def _check(since: datetime, until: datetime, step_seconds: int, now: datetime) -> None:
    for name, value in (("since", since), ("until", until)):
        if not isinstance(value, datetime) or timezone.is_naive(value):
            raise ValueError(f"{name}: a timezone-aware datetime is required, got {value!r}.")
    if not (
        isinstance(step_seconds, int) and 0 < step_seconds <= 3600 and 3600 % step_seconds == 0
    ):
        raise ValueError(f"step: {step_seconds!r} s must divide the hour (e.g. 15, 30, 60, 300).")
    if until > now:
        raise ValueError(f"until: {until.isoformat()} is in the future (now {now.isoformat()}).")
    if floor_hour(since) >= floor_hour(until):
        raise ValueError(
            f"since: {since.isoformat()} leaves no whole hour before until {until.isoformat()}."
        )
    if until - since > MAX_RANGE:
        raise ValueError(f"since: at most {MAX_RANGE.days} days before until.")


class _Demand(NamedTuple):
    """Demand intervals of the tree's project queues, and the time they are known from."""

    intervals: list[DemandInterval]
    since: datetime


def _leaf_allocations(
    series: list[Series],
    names: dict,
    *,
    step_seconds: int,
    since: datetime,
    until: datetime,
    result: KaiImportResult,
) -> dict[str, dict[datetime, list[Piece]]]:
    """Pieces per hour of each project queue; other queues' GPU-seconds and the parent
    queues seen go to ``result``."""
    leaf_pieces: dict[str, dict[datetime, list[Piece]]] = {}
    for one in series:
        queue = one.labels.get(QUEUE_LABEL, NO_LABEL)
        pieces = allocation_pieces(one.samples, step_seconds=step_seconds, since=since, until=until)
        node = names.get(queue)
        if node is None:
            seen = sum((p.gpu_seconds for ps in pieces.values() for p in ps), ZERO)
            result.unknown[queue] = result.unknown.get(queue, ZERO) + seen
        elif node.kind != "project":
            result.parents.add(queue)
        else:
            leaf_pieces[queue] = pieces
    return leaf_pieces


def _read_demand(
    cluster: Cluster,
    prometheus_url: str,
    demand_query: str | None,
    names: dict,
    *,
    step_seconds: int,
    since: datetime,
    until: datetime,
) -> _Demand:
    """Demand from ``demand_query`` since the accounting cursor (or ``since``); none
    without a query."""
    if not demand_query:
        return _Demand([], since)
    demand_since = since
    cursor = AccountingCursor.objects.filter(cluster=cluster).first()
    if cursor is not None and cursor.accounted_until < since:
        # Entitlement continues from the cursor: demand must be known from there on.
        demand_since = max(floor_hour(cursor.accounted_until), until - MAX_RANGE)
    intervals = _demand_intervals(
        prometheus_query_range(
            url=prometheus_url,
            query=demand_query,
            start=demand_since,
            end=until - timedelta(seconds=step_seconds),
            step_seconds=step_seconds,
        ),
        names=names,
        step_seconds=step_seconds,
        since=demand_since,
        until=until,
    )
    return _Demand(intervals, demand_since)


def _charge_queues(
    cluster: Cluster,
    leaf_pieces: dict[str, dict[datetime, list[Piece]]],
    names: dict,
    now: datetime,
    result: KaiImportResult,
) -> None:
    """Record every piece of every project queue in the ledger; count in ``result``."""
    projects = Project.objects.select_related("program").in_bulk([names[q].id for q in leaf_pieces])
    for queue, by_hour in sorted(leaf_pieces.items()):
        project = projects[names[queue].id]
        added = ZERO
        for hour, pieces in by_hour.items():
            for piece in pieces:
                done = usage_external_record(
                    cluster=cluster,
                    project=project,
                    source=SOURCE,
                    external_id=f"{queue}@{hour:%Y-%m-%dT%H:%MZ}",
                    start=piece.start,
                    end=piece.end,
                    gpus=piece.gpus,
                    now=now,
                )
                if done.status == UNCHANGED:
                    result.already += 1
                result.rows += done.rows
                added += done.gpu_seconds
        result.charged[queue] = added


def kai_usage_import(
    *,
    cluster: Cluster,
    prometheus_url: str,
    since: datetime,
    until: datetime | None = None,
    step_seconds: int = 60,
    prefix: str | None = None,
    metric: str = DEFAULT_METRIC,
    demand_query: str | None = None,
    now: datetime | None = None,
) -> KaiImportResult:
    """Charge the GPUs KAI allocated to each project's queue in the whole hours of [since, until).

    ``since`` and ``until`` are rounded down to whole hours; ``until`` defaults to the last
    hour that closed at least 5 minutes ago (Prometheus may still be ingesting the newest
    samples). ``prefix`` is the one given to ``kai_queues`` (default: the cluster slug).
    Prometheus is read completely before anything is written, and everything is written in
    one transaction: an unreachable Prometheus (``PrometheusError``) or bad input
    (``ValueError`` naming the field) changes nothing. Re-running over the same hours
    writes nothing (idempotent by queue and hour). With ``demand_query`` entitlement and
    demand are appended too, from the accounting cursor (started at ``since``) to ``until``.
    """
    now = now or timezone.now()
    if until is None:
        until = floor_hour(now - timedelta(minutes=5))
    _check(since, until, step_seconds, now)
    since, until = floor_hour(since), floor_hour(until)
    names = queue_names(
        root=kai_tree_read(cluster=cluster, at=until), prefix=prefix or cluster.slug
    )
    series: list[Series] = prometheus_query_range(
        url=prometheus_url,
        # One value per queue even when several controller replicas are scraped.
        query=f"max by ({QUEUE_LABEL}) ({metric})",
        start=since,
        end=until - timedelta(seconds=step_seconds),
        step_seconds=step_seconds,
    )
    result = KaiImportResult(since=since, until=until)
    leaf_pieces = _leaf_allocations(
        series, names, step_seconds=step_seconds, since=since, until=until, result=result
    )
    demand = _read_demand(
        cluster,
        prometheus_url,
        demand_query,
        names,
        step_seconds=step_seconds,
        since=since,
        until=until,
    )
    with transaction.atomic():
        _charge_queues(cluster, leaf_pieces, names, now, result)
        if demand_query:
            # The first call only starts the cursor (the service's rule): start it at since.
            usage_external_entitlement(cluster=cluster, demand=[], until=demand.since)
            result.entitlement_rows = usage_external_entitlement(
                cluster=cluster, demand=demand.intervals, until=until
            )
    return result


def _demand_intervals(
    series: list[Series],
    *,
    names: dict,
    step_seconds: int,
    since: datetime,
    until: datetime,
) -> list[DemandInterval]:
    """Demand of the tree's project queues as intervals of whole GPUs (others are ignored)."""
    intervals = []
    for one in series:
        node = names.get(one.labels.get(QUEUE_LABEL, NO_LABEL))
        if node is None or node.kind != "project":
            continue
        pieces = allocation_pieces(one.samples, step_seconds=step_seconds, since=since, until=until)
        for hour_pieces in pieces.values():
            intervals.extend(DemandInterval(node.id, p.gpus, p.start, p.end) for p in hour_pieces)
    return intervals
