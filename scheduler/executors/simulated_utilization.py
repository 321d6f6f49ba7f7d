"""The simulated agents' GPU telemetry: the rule of ``utilization_model`` reported like a real
agent's, and written into a replayed history.

Live (``simulated_executor_report``): each step, every open run on a simulated node whose
minute mark has passed since its last report (a real agent reports every minute; each run
here at its own second of the minute, so the reports spread over the steps), and every run
the step just ended, gets one period from where its reports stopped to now, sent per node
in one call to ``scheduler.services.utilization.utilization_report`` — the service the
agent API calls — so the hourly rows, the idle rule and every page see the demo like a real
cluster.
Where reports stopped is read from the stored rows, so a restarted server carries on; after
a long stop only the last ``CATCH_UP`` is reported (an agent that was away measured nothing).

History (``utilization_history_rows``): one row per run, node and hour of the replayed
ledger, allocated exactly the ledger's GPU-seconds of that run and hour.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, Decimal

from django.core.exceptions import ValidationError
from django.db.models import Max, Min, Sum
from django.db.models.functions import TruncHour

from governance.models import Cluster
from scheduler.executors.utilization_model import utilization_profile
from scheduler.models import Node, Run, RunNode, UsageRecord, UtilizationHour
from scheduler.services.utilization import utilization_report

logger = logging.getLogger(__name__)

REPORT_EVERY = timedelta(seconds=60)  # as the real agent (wall time)
CATCH_UP = timedelta(hours=1)
SAMPLE_SECONDS = 5  # the real agent samples every 5 s: samples counted per GPU alike
SIX_PLACES = Decimal("0.000001")
MICROS = Decimal(1_000_000)


def _seconds(delta: timedelta) -> Decimal:
    return Decimal(delta // timedelta(microseconds=1)) / MICROS


def _hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


PLACEMENT_FIELDS = (
    "run_id",
    "node_id",
    "gpus",
    "run__started_at",
    "run__ended_at",
    "run__workload_id",
    "run__workload__gpus",
    "run__workload__declared_duration_seconds",
)


def _placements(cluster: Cluster, node_ids: list[int], ended: set[int]) -> list[tuple]:
    """``PLACEMENT_FIELDS`` of the open runs on the nodes, and of the ``ended`` ones."""
    placements = list(
        RunNode.objects.filter(
            node_id__in=node_ids, run__cluster=cluster, run__ended_at__isnull=True
        ).values_list(*PLACEMENT_FIELDS)
    )
    if ended:
        placements += RunNode.objects.filter(
            node_id__in=node_ids, run_id__in=ended, run__ended_at__isnull=False
        ).values_list(*PLACEMENT_FIELDS)
    return placements


def _due(run_id: int, last: datetime, now: datetime) -> bool:
    """Whether the run's minute mark passed since ``last``: every run is reported once a
    minute, each at its own second of the minute (from its id), so a step reports a few
    runs rather than all of them every minute."""
    every = REPORT_EVERY.total_seconds()
    phase = run_id % int(every)
    return (now.timestamp() - phase) // every > (last.timestamp() - phase) // every


def busy_of(allocated: Decimal, share: float) -> Decimal:
    """``allocated`` x ``share``, to the microsecond, rounded down (so never above it)."""
    busy = (allocated * Decimal(repr(share))).quantize(SIX_PLACES, rounding=ROUND_DOWN)
    return min(max(busy, Decimal(0)), allocated)


def simulated_executor_report(
    *,
    cluster: Cluster,
    nodes: list[Node],
    now: datetime,
    factor: float,
    default_seconds: float,
    ended: Iterable[int] = (),
) -> int:
    """Report the simulated nodes' periods that are due (see the module docstring): open runs
    once a minute, and the runs in ``ended`` (just ended by this step) up to their end.

    At most one ``utilization_report`` per node; returns the periods stored or repeated. A
    batch the service refuses (an overlapping step reported first) is logged and left to the
    next step, which starts again from the stored rows."""
    by_id = {n.pk: n for n in nodes}
    placements = _placements(cluster, list(by_id), set(ended))
    if not placements:
        return 0
    last = {
        (run_id, node_id): until
        for run_id, node_id, until in UtilizationHour.objects.filter(
            run_id__in={p[0] for p in placements}, hour__gte=_hour_of(now - CATCH_UP)
        )
        .values("run_id", "node_id")
        .annotate(until=Max("reported_until"))
        .values_list("run_id", "node_id", "until")
    }
    batches: dict[int, list[dict]] = defaultdict(list)
    for run_id, node_id, gpus, started, ended_at, workload_id, w_gpus, declared in placements:
        start = max(last.get((run_id, node_id), started), started, now - CATCH_UP)
        end = now if ended_at is None else min(now, ended_at)
        if end <= start or (ended_at is None and not _due(run_id, start, end)):
            continue
        profile = utilization_profile(
            workload_id=workload_id,
            gpus=w_gpus,
            declared_seconds=float(declared or default_seconds),
        )
        share = profile.mean(
            (start - started).total_seconds() * factor, (end - started).total_seconds() * factor
        )
        allocated = gpus * _seconds(end - start)
        batches[node_id].append(
            {
                "run": run_id,
                "start": start,
                "end": end,
                "allocated_gpu_seconds": allocated,
                "busy_gpu_seconds": busy_of(allocated, share),
                "samples": int((end - start).total_seconds() // SAMPLE_SECONDS) * gpus,
            }
        )
    reported = 0
    for node_id, items in batches.items():
        try:
            utilization_report(node=by_id[node_id], reports=items, now=now)
        except ValidationError as exc:
            logger.warning("simulated utilization of %s refused: %s", by_id[node_id].name, exc)
            continue
        reported += len(items)
    return reported


def utilization_history_rows(*, cluster: Cluster, runs: list[Run], batch_size: int = 5000) -> int:
    """Write the utilization of a replayed history's ``runs`` (stored and accounted, on the
    trace's own clock) by the rule; returns the rows written.

    One row per run, node and UTC hour of the run's ledger: allocated is exactly the ledger's
    GPU-seconds of that run and hour (a gang's split over its nodes by their GPUs), busy is
    allocated x the rule's mean over the hour's span, rounded down (so busy <= allocated)."""
    by_id = {run.pk: run for run in runs}
    placements: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for run_id, node_id, gpus in (
        RunNode.objects.filter(run__cluster=cluster)
        .order_by("run_id", "node_id")
        .values_list("run_id", "node_id", "gpus")
    ):
        if run_id in by_id:
            placements[run_id].append((node_id, gpus))
    ledger = (
        UsageRecord.objects.filter(cluster=cluster, run__isnull=False)
        .annotate(hour=TruncHour("interval_start", tzinfo=UTC))
        .values("run_id", "hour")
        .annotate(total=Sum("gpu_seconds"), first=Min("interval_start"), until=Max("interval_end"))
        .values_list("run_id", "hour", "total", "first", "until")
    )
    rows = []
    profiles = {}
    for run_id, hour, total, first, until in ledger.iterator(chunk_size=10_000):
        run = by_id.get(run_id)
        if run is None:
            continue
        profile = profiles.get(run_id)
        if profile is None:
            workload = run.workload
            profile = profiles[run_id] = utilization_profile(
                workload_id=workload.pk,
                gpus=workload.gpus,
                declared_seconds=float(workload.declared_duration_seconds or 0),
            )
        share = profile.mean(
            (first - run.started_at).total_seconds(), (until - run.started_at).total_seconds()
        )
        covered = _seconds(until - first)
        for (node_id, gpus), allocated in zip(
            placements[run_id], _split(total, [g for _, g in placements[run_id]]), strict=True
        ):
            rows.append(
                UtilizationHour(
                    run_id=run_id,
                    project_id=run.project_id,
                    cluster_id=cluster.pk,
                    node_id=node_id,
                    hour=hour,
                    allocated_gpu_seconds=allocated,
                    busy_gpu_seconds=busy_of(allocated, share),
                    samples=int(covered // SAMPLE_SECONDS) * gpus,
                    covered_from=first,
                    reported_until=until,
                    covered_seconds=covered,
                )
            )
    UtilizationHour.objects.bulk_create(rows, batch_size=batch_size)
    return len(rows)


def _split(total: Decimal, weights: list[int]) -> list[Decimal]:
    """``total`` in parts proportional to ``weights``, to the microsecond, summing exactly
    (cumulative floors; the last part takes the rest)."""
    whole, running, before, parts = sum(weights), 0, Decimal(0), []
    for i, weight in enumerate(weights):
        running += weight
        upto = (
            total
            if i == len(weights) - 1
            else (total * running / whole).quantize(SIX_PLACES, rounding=ROUND_DOWN)
        )
        parts.append(upto - before)
        before = upto
    return parts
