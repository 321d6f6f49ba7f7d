"""Usage and owed figures read from a scheduler this product governs but does not drive.

A Slurm site (``slurm_import_usage``) or a Kubernetes site with KAI Scheduler (usage read
from Prometheus) runs its own scheduler; its jobs reach the same ledger as the live loop's
runs, so every rollup, dashboard and report shows them:

- ``usage_external_record`` appends GPU-seconds of one external job (or pod, or step) to
  ``UsageRecord`` (``run`` empty; ``source`` + ``external_id`` name it) and to the hourly
  rollup, with the live loop's charging rule (free lane → ``free``; else ``budgeted`` up to
  the entitlement the project accrued in the hour, ``burst`` above it). It is idempotent by
  ``(cluster, source, external_id)``: the ledger remembers how far the job was charged, so a
  re-import writes nothing and a job first seen running (charged up to then) and later seen
  finished gets only the remainder. The ledger stays append-only.
- ``usage_external_entitlement`` appends entitlement and demand (what *owed* is computed
  from) for the interval since the cluster's accounting cursor, from demand intervals the
  caller read from its scheduler (e.g. submit → end of every job), then advances the cursor.

Both take the cluster's accounting lock, so they never interleave with the live loop's
accounting of the same cluster, and join the caller's transaction: an import that wraps its
calls in one ``transaction.atomic()`` is all-or-nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.db.models import Max, Sum
from django.utils import timezone

from governance.models import Cluster, Project
from governance.services.reports import usage_days_reopen
from scheduler.choices import NodeState
from scheduler.models import AccountingCursor, EntitlementRecord, Node, UsageRecord
from scheduler.selectors.budget import cluster_budget
from scheduler.services.locks import ACCOUNTING_LOCK, locked_transaction

# The charging rule, the entitlement row and the rollup are the live loop's own (one place).
from scheduler.services.usage_charging import (
    ZERO,
    UsageHourRollup,
    charge_split,
    entitlement_record,
    gpu_seconds,
    hour_pieces,
    rate_seconds,
    usage_row,
)

CREATED = "created"
UNCHANGED = "unchanged"
MAX_EXTERNAL_ID = UsageRecord._meta.get_field("external_id").max_length
MAX_SOURCE = UsageRecord._meta.get_field("source").max_length


@dataclass(frozen=True)
class ExternalUsageResult:
    """What one ``usage_external_record`` call did.

    ``status`` is ``"created"`` when ledger rows were written, ``"unchanged"`` when the
    interval was already charged (a re-import). ``gpu_seconds`` is what this call added;
    ``charged_until`` is how far the job is now charged (``None`` if never).
    """

    status: str
    rows: int
    gpu_seconds: Decimal
    charged_until: datetime | None


@dataclass(frozen=True)
class DemandInterval:
    """``gpus`` GPUs asked for by ``project_id`` over ``[start, end)`` (``end`` None = still)."""

    project_id: int
    gpus: int
    start: datetime
    end: datetime | None


def external_healthy_gpus(*, cluster: Cluster) -> int:
    """GPUs an external cluster's shares are taken of.

    Its nodes are not agents of this product, so the cluster's configured size
    (``nodes`` x ``gpus_per_node``) is used, unless nodes are registered (then the healthy ones).
    """
    nodes = Node.objects.filter(cluster=cluster)
    if not nodes.exists():
        return cluster.total_gpus
    return nodes.filter(state=NodeState.HEALTHY).aggregate(total=Sum("gpus"))["total"] or 0


def _check_instant(value, field: str) -> datetime:
    if not isinstance(value, datetime) or timezone.is_naive(value):
        raise ValueError(f"{field}: a timezone-aware datetime is required, got {value!r}.")
    return value


@dataclass(frozen=True)
class _ExternalJob:
    """One external job as ``usage_external_record`` charges it: its ledger key and shape."""

    cluster: Cluster
    project: Project
    source: str
    external_id: str
    gpus: int
    free: bool


def _check_external_job(job: _ExternalJob, start: datetime, end: datetime, now: datetime) -> None:
    """Raise ``ValueError`` naming the field when ``job`` over ``[start, end)`` cannot be
    charged at ``now``."""
    _check_instant(start, "start")
    _check_instant(end, "end")
    source, external_id, gpus = job.source, job.external_id, job.gpus
    if not source or len(source) > MAX_SOURCE:
        raise ValueError(f"source: 1 to {MAX_SOURCE} characters required, got {source!r}.")
    if not external_id or len(external_id) > MAX_EXTERNAL_ID:
        raise ValueError(
            f"external_id: 1 to {MAX_EXTERNAL_ID} characters required, got {external_id!r}."
        )
    if not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"gpus: a whole number >= 0 required, got {gpus!r}.")
    if end < start:
        raise ValueError(f"end: {end.isoformat()} is before start {start.isoformat()}.")
    if end > now:
        raise ValueError(f"end: {end.isoformat()} is in the future (now {now.isoformat()}).")
    if job.project.program.organization_id != job.cluster.organization_id:
        raise ValueError(
            f"project: {job.project} does not belong to the organization of cluster {job.cluster}."
        )


def _external_records(
    job: _ExternalJob,
    pieces: list[tuple[datetime, datetime, datetime]],
    rollup: UsageHourRollup,
    now: datetime,
) -> list[UsageRecord]:
    """The (unsaved) ledger rows of ``job``'s hour ``pieces`` by the charging rule, each
    added to ``rollup``; the caller holds the cluster's accounting lock."""
    cluster, project, gpus = job.cluster, job.project, job.gpus
    share = cluster_budget(cluster=cluster, at=now).effective.get(project.id, ZERO)
    healthy = external_healthy_gpus(cluster=cluster)
    # Entitlement accrues from the top of each hour until the cursor says how far it
    # was accounted (imported history may come before any entitlement pass).
    entitled_until = AccountingCursor.objects.filter(cluster=cluster).values_list(
        "accounted_until", flat=True
    ).first() or pieces[0][0].replace(minute=0, second=0, microsecond=0)
    records: list[UsageRecord] = []

    for hour, piece_start, piece_end in pieces:
        # Accrued by the piece's end: what is accounted for the hour, plus the share of
        # the healthy GPUs for the seconds not accounted yet.
        accrued = rollup.entitled(project.id, hour)
        accrue_from = max(hour, entitled_until)
        if piece_end > accrue_from:
            accrued += rate_seconds(share, healthy, accrue_from, piece_end)
        for part_start, part_end, charge in charge_split(
            rollup,
            project_id=project.id,
            hour=hour,
            start=piece_start,
            end=piece_end,
            gpus=gpus,
            free=job.free,
            accrued=accrued,
        ):
            records.append(
                usage_row(
                    rollup,
                    hour=hour,
                    project_id=project.id,
                    cluster_id=cluster.id,
                    start=part_start,
                    end=part_end,
                    gpus=gpus,
                    charge=charge,
                    source=job.source,
                    external_id=job.external_id,
                )
            )
    return records


def usage_external_record(
    *,
    cluster: Cluster,
    project: Project,
    source: str,
    external_id: str,
    start: datetime,
    end: datetime,
    gpus: int,
    free: bool = False,
    now: datetime | None = None,
) -> ExternalUsageResult:
    """Charge ``gpus`` GPUs of ``project`` over ``[start, end)`` for one external job.

    Idempotent by ``(cluster, source, external_id)``: only the part of ``[start, end)``
    after what the ledger already holds for that key is written. Call it with ``end`` = now
    for a job still running and again with its real end once it finished. ``free`` charges
    the free lane (Slurm's free QOS). ``end`` may not lie after ``now`` (the future is never
    charged). Raises ``ValueError`` naming the field on bad input; writes nothing then.
    """
    now = now or timezone.now()
    job = _ExternalJob(cluster, project, source, external_id, gpus, free)
    _check_external_job(job, start, end, now)
    with locked_transaction(ACCOUNTING_LOCK, cluster.id, wait=True):
        charged_until = UsageRecord.objects.filter(
            cluster=cluster, run__isnull=True, source=source, external_id=external_id
        ).aggregate(until=Max("interval_end"))["until"]
        begin = max(start, charged_until) if charged_until else start
        if gpus == 0 or begin >= end:
            return ExternalUsageResult(UNCHANGED, 0, ZERO, charged_until)
        pieces = list(hour_pieces(begin, end))
        rollup = UsageHourRollup.load(cluster.id, {(project.id, hour) for hour, _, _ in pieces})
        records = _external_records(job, pieces, rollup, now)
        UsageRecord.objects.bulk_create(records)
        rollup.save()
        if pieces:
            # A job imported late may charge days the daily cache already holds.
            usage_days_reopen(cluster_id=cluster.id, since=pieces[0][0].astimezone(UTC).date())
    added = sum((r.gpu_seconds for r in records), ZERO)
    return ExternalUsageResult(CREATED, len(records), added, end)


def usage_external_entitlement(
    *,
    cluster: Cluster,
    demand: Iterable[DemandInterval],
    until: datetime | None = None,
    start: datetime | None = None,
) -> int:
    """Append entitlement and demand of ``cluster`` from its accounting cursor to ``until``.

    Entitled = effective share (as of ``until``) x ``external_healthy_gpus`` x seconds, for
    every budgeted project; demand = Σ GPUs x overlap of the ``demand`` intervals (what the
    external scheduler's jobs asked for between submit and end), exactly, per hour piece.
    Owed per hour is then min(entitled, demand), as for the live loop. The first call only
    starts the cursor at ``start`` (default ``until``: nothing before it is known) and
    accounts from there. Returns the rows written.
    """
    until = until or timezone.now()
    _check_instant(until, "until")
    if start is not None:
        _check_instant(start, "start")
    with locked_transaction(ACCOUNTING_LOCK, cluster.id, wait=True):
        begin = min(start or until, until)
        cursor, _ = AccountingCursor.objects.select_for_update().get_or_create(
            cluster=cluster, defaults={"accounted_until": begin, "accounted_from": begin}
        )
        if cursor.accounted_until >= until:
            return 0
        since = cursor.accounted_until
        effective = cluster_budget(cluster=cluster, at=until).effective
        healthy = external_healthy_gpus(cluster=cluster)
        pieces = list(hour_pieces(since, until))
        asked: dict[tuple[int, datetime], Decimal] = defaultdict(lambda: ZERO)
        at_start: dict[tuple[int, datetime], int] = defaultdict(int)
        for interval in demand:
            stop = min(interval.end or until, until)
            for _hour, piece_start, piece_end in pieces:
                lo, hi = max(piece_start, interval.start), min(piece_end, stop)
                if lo < hi:
                    asked[(interval.project_id, piece_start)] += gpu_seconds(interval.gpus, lo, hi)
                if lo <= piece_start < hi:
                    at_start[(interval.project_id, piece_start)] += interval.gpus
        projects = {p for p, share in effective.items() if share > 0} | {p for p, _ in asked}
        rollup = UsageHourRollup.load(
            cluster.id, {(p, hour) for p in projects for hour, _, _ in pieces}
        )
        records = []
        for project_id in sorted(projects):
            share = effective.get(project_id, ZERO)
            for hour, piece_start, piece_end in pieces:
                records.append(
                    entitlement_record(
                        rollup,
                        cluster_id=cluster.id,
                        project_id=project_id,
                        hour=hour,
                        start=piece_start,
                        end=piece_end,
                        share=share,
                        healthy_gpus=healthy,
                        demand_gpus=at_start.get((project_id, piece_start), 0),
                        demand_gpu_seconds=asked.get((project_id, piece_start), ZERO),
                    )
                )
        EntitlementRecord.objects.bulk_create(records)
        rollup.save()
        cursor.accounted_until = until
        cursor.save(update_fields=["accounted_until"])
    return len(records)
