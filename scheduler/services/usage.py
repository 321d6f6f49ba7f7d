"""The usage ledger: closing intervals of runs, charging them, rolling them up per hour.

The charging rule (docs/live-loop.md, "Charging") and the hourly rollup are
``usage_charging``'s. The ledger rows keep the class they were charged with;
``usage_rebuild`` only re-sums them.

Every interval lies inside one UTC hour, so the hourly rollup (``UsageHour``) is a plain sum
of ledger rows and is updated incrementally here (never by rescanning the ledger).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise

from django.db.models import Case, DateTimeField, F, Q, Sum, Value, When
from django.db.models.functions import TruncHour
from django.utils import timezone

from governance.models import Allocation, Cluster
from governance.services.reports import usage_days_reopen
from scheduler.choices import DEMAND_STATES, NodeState, RunLane
from scheduler.models import (
    AccountingCursor,
    EntitlementRecord,
    Node,
    Run,
    UsageHour,
    UsageRecord,
    Workload,
)
from scheduler.selectors.budget import ClusterBudget, cluster_budget
from scheduler.services.locks import ACCOUNTING_LOCK, locked_transaction
from scheduler.services.usage_charging import (
    CHARGE_FIELD,
    HOUR,
    ZERO,
    EntitlementPass,
    UsageHourRollup,
    charge_split,
    entitlement_record,
    gpu_seconds,
    hour_pieces,
    usage_row,
)


def _healthy_gpus(cluster_id: int) -> int:
    return (
        Node.objects.filter(cluster_id=cluster_id, state=NodeState.HEALTHY).aggregate(
            total=Sum("gpus")
        )["total"]
        or 0
    )


def _account_pass(
    *,
    cluster: Cluster,
    runs: list[Run],
    now: datetime,
    since: datetime,
    demand: dict[int, int] | None = None,
) -> int:
    """One accounting pass, under the caller's accounting lock: entitlement and demand up to
    ``now`` (``_account_entitlement``), then the time of ``runs`` charged against it
    (``_account_runs``). The hourly rollup rows both touch are locked and read once and
    written once. Returns the number of usage ledger rows written."""
    rollup = UsageHourRollup.load(cluster.id, ())
    entitlement = _account_entitlement(
        cluster=cluster, now=now, since=since, rollup=rollup, demand=demand
    )
    written = _account_runs(
        cluster=cluster, runs=runs, now=now, entitlement=entitlement, rollup=rollup
    )
    rollup.save()
    return written


def _account_runs(
    *,
    cluster: Cluster,
    runs: list[Run],
    now: datetime,
    entitlement: EntitlementPass,
    rollup: UsageHourRollup,
) -> int:
    """Write ledger rows for ``runs`` from ``accounted_until`` to their end (or ``now``).

    Part of ``_account_pass``: entitlement was just accounted up to ``now`` (``entitlement``:
    what that wrote) into ``rollup``, which the pass saves. Returns the number of ledger rows.
    """
    pieces = []  # (piece start, run id, run, hour, piece end)
    for run in runs:
        until = min(run.ended_at, now) if run.ended_at else now
        for hour, start, end in hour_pieces(run.accounted_until, until):
            pieces.append((start, run.id, run, hour, end))
    pieces.sort(key=lambda p: (p[0], p[1]))
    rollup.extend({(p[2].project_id, p[3]) for p in pieces})
    records: list[UsageRecord] = []

    for start, _, run, hour, end in pieces:
        free = run.lane == RunLane.FREE
        for piece_start, piece_end, charge in charge_split(
            rollup,
            project_id=run.project_id,
            hour=hour,
            start=start,
            end=end,
            gpus=run.gpus,
            free=free,
            accrued=ZERO if free else entitlement.accrued(rollup, run.project_id, hour, end),
        ):
            records.append(
                usage_row(
                    rollup,
                    hour=hour,
                    project_id=run.project_id,
                    cluster_id=cluster.id,
                    start=piece_start,
                    end=piece_end,
                    gpus=run.gpus,
                    charge=charge,
                    run_id=run.id,
                )
            )

    UsageRecord.objects.bulk_create(records)
    by_until: dict[datetime, list[int]] = defaultdict(list)
    for run in runs:
        until = min(run.ended_at, now) if run.ended_at else now
        if until > run.accounted_until:
            by_until[until].append(run.id)
            run.accounted_until = until
    if len(by_until) == 1:
        ((until, ids),) = by_until.items()
        Run.objects.filter(id__in=ids).update(accounted_until=until)
    elif by_until:
        # Runs that ended since the last pass each stop at their own end: one statement.
        Run.objects.filter(id__in=[i for ids in by_until.values() for i in ids]).update(
            accounted_until=Case(
                *(When(id__in=ids, then=Value(until)) for until, ids in by_until.items()),
                output_field=DateTimeField(),
            )
        )
    return len(records)


def run_account(*, run: Run, now: datetime) -> int:
    """Close the ledger of one run up to its end (or ``now``); the caller holds the lock.

    Called by ``run_end`` inside the transaction that ends the run, so a stop is charged
    exactly up to its end. Entitlement is accounted up to ``now`` first, so the run's time is
    charged against the entitlement of the same seconds.
    """
    cluster = Cluster.objects.get(pk=run.cluster_id)
    return _account_pass(cluster=cluster, runs=[run], now=now, since=run.accounted_until)


def _share_steps(
    cluster: Cluster, start: datetime, end: datetime
) -> list[tuple[datetime, datetime, ClusterBudget]]:
    """``[start, end)`` cut where any share of the cluster starts or ends, with the budget in
    force on each piece (so entitlement follows a share changed between two passes)."""
    changes = sorted(
        {
            t
            for pair in Allocation.objects.filter(cluster=cluster)
            .filter(
                Q(valid_from__gt=start, valid_from__lt=end)
                | Q(valid_to__gt=start, valid_to__lt=end)
            )
            .values_list("valid_from", "valid_to")
            for t in pair
            if t is not None and start < t < end
        }
    )
    bounds = [start, *changes, end]
    return [(a, b, cluster_budget(cluster=cluster, at=a)) for a, b in pairwise(bounds)]


def _account_entitlement(
    *,
    cluster: Cluster,
    now: datetime,
    since: datetime,
    rollup: UsageHourRollup,
    demand: dict[int, int] | None = None,
) -> EntitlementPass:
    """Append entitlement/demand rows from the cluster's cursor to ``now``; advance it.
    The figures go into ``rollup`` too, which the caller (``_account_pass``) saves.

    The interval is cut where a share starts or ends, so each piece is entitled at the shares
    in force then. Healthy GPUs are those of now: every change of a node's state accounts up
    to its moment first (``scheduler.services.nodes``), so they held for the whole interval.
    The first pass starts at ``since``, the earliest second this pass charges to a run: run
    time and entitlement then cover the same seconds (otherwise the minutes between the first
    start and the first pass count as used but never owed, and occupancy passes 100 %).
    ``demand``: GPUs asked per project (default: the cluster's charged workloads waiting or
    running now — free-lane work is opportunistic and never charged, so it asks for nothing
    a team is owed; a replayed history passes what was asked then).
    """
    start = min(since, now)
    cursor, _ = AccountingCursor.objects.select_for_update().get_or_create(
        cluster=cluster, defaults={"accounted_until": start, "accounted_from": start}
    )
    done = EntitlementPass()
    if cursor.accounted_until >= now:
        return done
    healthy_gpus = _healthy_gpus(cluster.id)
    if demand is None:
        demand = dict(
            Workload.objects.filter(
                cluster=cluster, state__in=DEMAND_STATES, min_runtime_seconds__gt=0
            )
            .values_list("project_id")
            .annotate(total=Sum("gpus"))
        )
    steps = _share_steps(cluster, cursor.accounted_until, now)
    projects = {p for _, _, budget in steps for p, share in budget.effective.items() if share > 0}
    projects |= {p for p, gpus in demand.items() if gpus}
    pieces = [
        (hour, max(start, a), min(end, b), budget)
        for a, b, budget in steps
        for hour, start, end in hour_pieces(a, b)
    ]
    rollup.extend({(p, hour) for p in projects for hour, _, _, _ in pieces})
    records = []
    for project_id in sorted(projects):
        wanted = demand.get(project_id, 0)
        for hour, start, end, budget in pieces:
            record = entitlement_record(
                rollup,
                cluster_id=cluster.id,
                project_id=project_id,
                hour=hour,
                start=start,
                end=end,
                share=budget.effective.get(project_id, ZERO),
                healthy_gpus=healthy_gpus,
                demand_gpus=wanted,
                demand_gpu_seconds=gpu_seconds(wanted, start, end),
            )
            records.append(record)
            done.pieces.setdefault((project_id, hour), []).append(
                (start, end, record.entitled_gpu_seconds)
            )
    EntitlementRecord.objects.bulk_create(records)
    cursor.accounted_until = now
    cursor.save(update_fields=["accounted_until"])
    return done


def usage_account(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Close the ledger of every running run of ``cluster`` up to ``now``; roll it up.

    Entitlement and demand are appended first for the interval since the last pass, then
    run time is charged against the entitlement accrued by each second. Idempotent: each run
    remembers how far it was accounted and ledger rows are unique per
    ``(run, interval_start)``, so a retried or concurrent call charges nothing twice.
    Returns the number of usage ledger rows written.
    """
    now = now or timezone.now()
    with locked_transaction(ACCOUNTING_LOCK, cluster.id, wait=True):
        runs = list(
            Run.objects.filter(cluster=cluster)
            .filter(Q(ended_at__isnull=True) | Q(accounted_until__lt=F("ended_at")))
            .only("id", "project_id", "gpus", "lane", "accounted_until", "ended_at")
        )
        since = min((run.accounted_until for run in runs), default=now)
        written = _account_pass(cluster=cluster, runs=runs, now=now, since=since)
    return written


def usage_account_history(
    *, cluster: Cluster, runs: list[Run], demand_at, until: datetime, step: timedelta = HOUR
) -> int:
    """Account a history of ``runs`` (stored, not yet accounted) pass by pass up to ``until``.

    The same two passes as ``usage_account`` at every ``step`` boundary (whole UTC hours),
    reading only the runs open in each step. ``demand_at(t)``: GPUs asked per project at
    ``t``. Used to give a new installation a past (``load_demo --history-days``). Returns the
    ledger rows written.
    """
    runs = sorted(runs, key=lambda r: (r.started_at, r.id))
    if not runs:
        return 0
    first = runs[0].started_at
    boundary = first.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + step
    written, i, active = 0, 0, []
    while True:
        now = min(boundary, until)
        while i < len(runs) and runs[i].started_at < now:
            active.append(runs[i])
            i += 1
        with locked_transaction(ACCOUNTING_LOCK, cluster.id, wait=True):
            written += _account_pass(
                cluster=cluster, runs=active, now=now, since=first, demand=demand_at(now)
            )
        active = [r for r in active if r.ended_at is None or r.accounted_until < r.ended_at]
        if now >= until:
            return written
        boundary += step


def usage_rebuild(*, cluster: Cluster) -> int:
    """Rebuild ``cluster``'s hourly rollup from the two ledgers; returns the rows written.

    The rollup is a cache: this must give exactly what incremental accounting gave. The
    daily cache made from it is dropped in the same transaction (every reader takes the
    hourly rows until ``usage_days_refresh`` rolls the days again): after a repair of the
    ledger, reports must not keep the days as they were.
    """
    with locked_transaction(ACCOUNTING_LOCK, cluster.id, wait=True):
        rows: dict[tuple[int, datetime], UsageHour] = {}

        def row(project_id: int, hour: datetime) -> UsageHour:
            key = (project_id, hour.astimezone(UTC))
            if key not in rows:
                rows[key] = UsageHour(cluster_id=cluster.id, project_id=key[0], hour=key[1])
            return rows[key]

        usage = (
            UsageRecord.objects.filter(cluster=cluster)
            .annotate(hour=TruncHour("interval_start", tzinfo=UTC))
            .values_list("project_id", "hour", "charge")
            .annotate(total=Sum("gpu_seconds"))
        )
        for project_id, hour, charge, total in usage:
            setattr(row(project_id, hour), CHARGE_FIELD[charge], total)
        entitlement = (
            EntitlementRecord.objects.filter(cluster=cluster)
            .annotate(hour=TruncHour("interval_start", tzinfo=UTC))
            .values_list("project_id", "hour")
            .annotate(entitled=Sum("entitled_gpu_seconds"), demand=Sum("demand_gpu_seconds"))
        )
        for project_id, hour, entitled, demand in entitlement:
            target = row(project_id, hour)
            target.entitled_gpu_seconds = entitled
            target.demand_gpu_seconds = demand
        UsageHour.objects.filter(cluster=cluster).delete()
        UsageHour.objects.bulk_create(rows.values())
        usage_days_reopen(cluster_id=cluster.id, since=date.min)
    return len(rows)
