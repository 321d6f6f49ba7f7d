"""GPU utilization next to the usage ledger, and the idle-allocation rule.

``utilization_report`` stores what a node agent measured of its runs: each reported period
is split exactly across UTC hour boundaries into ``UtilizationHour`` rows. A period without
GPU telemetry (``busy_gpu_seconds`` None) is recorded as nothing at all: an absent row means
"not measured", so no report, selector or rule ever reads a made-up 0 % busy.

The idle-allocation rule (``idle_rule_apply``, ``idle_policy_set``) is ``idle_rule``'s and
importable from here too. Nothing here charges anything: the ledger stays in ``usage``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from itertools import pairwise
from typing import Any, NamedTuple

from django.core.exceptions import ValidationError
from django.db import transaction

from scheduler.models import Node, Run, RunNode, UtilizationHour
from scheduler.services.idle_rule import idle_policy_set, idle_rule_apply

HOUR = timedelta(hours=1)
SIX_PLACES = Decimal("0.000001")
ZERO = Decimal(0)
MICROS = Decimal(1_000_000)
MAX_REPORTS = 1000
# An ended run's last periods may arrive after its exit report (the agent flushes late).
RECENT_END = timedelta(hours=1)
# Agents' clocks drift a little from the server's.
CLOCK_SKEW = timedelta(minutes=5)
# Agents report every minute or so; a longer period is a clock error, not a measurement.
MAX_PERIOD = timedelta(hours=24)

__all__ = [
    "MAX_REPORTS",
    "hour_pieces",
    "idle_policy_set",
    "idle_rule_apply",
    "utilization_report",
]


def _seconds(delta: timedelta) -> Decimal:
    """A duration in exact seconds (microsecond precision, no float)."""
    return Decimal(delta // timedelta(microseconds=1)) / MICROS


def _hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _cumulative_split(total: Decimal, weights: list[Decimal], step: Decimal) -> list[Decimal]:
    """``total`` split in proportion to ``weights``, each part a multiple of ``step``, the
    parts summing to ``total`` exactly (cumulative floors: part i = floor(total x W_i / W) -
    floor(total x W_{i-1} / W), so no part is negative and none drifts)."""
    whole = sum(weights, ZERO)
    parts, before, running = [], ZERO, ZERO
    for i, weight in enumerate(weights):
        running += weight
        if i == len(weights) - 1:
            upto = total
        else:
            upto = (total * running / whole).quantize(step, rounding=ROUND_DOWN)
        parts.append(upto - before)
        before = upto
    return parts


def hour_pieces(
    *, start: datetime, end: datetime, allocated: Decimal, busy: Decimal, samples: int = 0
) -> list[dict[str, Any]]:
    """The parts of the period [start, end) in each UTC hour it touches, with allocated, busy
    and sample counts split in proportion to the time in each hour.

    Sums are preserved exactly and busy <= allocated in every part: busy and the idle rest
    (allocated - busy) are split separately and each part's allocated is their sum.
    """
    bounds = [start]
    cursor = _hour_of(start) + HOUR
    while cursor < end:
        bounds.append(cursor)
        cursor += HOUR
    bounds.append(end)
    spans = list(pairwise(bounds))
    weights = [_seconds(b - a) for a, b in spans]
    busy_parts = _cumulative_split(busy, weights, SIX_PLACES)
    idle_parts = _cumulative_split(allocated - busy, weights, SIX_PLACES)
    sample_parts = _cumulative_split(Decimal(samples), weights, Decimal(1))
    return [
        {
            "hour": _hour_of(a),
            "start": a,
            "end": b,
            "seconds": weights[i],
            "busy": busy_parts[i],
            "allocated": busy_parts[i] + idle_parts[i],
            "samples": int(sample_parts[i]),
        }
        for i, (a, b) in enumerate(spans)
    ]


def _check_item(index: int, item: Mapping, runs: dict[int, Run], gpus: dict[int, int], now):
    """Errors of one report item, keyed ``reports[i].field`` (empty when it is good)."""
    errors: dict[str, list[str]] = {}

    def bad(field: str, message: str) -> None:
        errors.setdefault(f"reports[{index}].{field}", []).append(message)

    run = runs.get(item["run"])
    if run is None:
        bad("run", f"No run {item['run']} on this node.")
    elif run.ended_at is not None and run.ended_at < now - RECENT_END:
        bad("run", f"Run {run.pk} ended at {run.ended_at.isoformat()}; too late to report it.")
    start, end = item["start"], item["end"]
    if end <= start:
        bad("end", "Must be after start.")
    elif end > now + CLOCK_SKEW:
        bad("end", "Is in the future.")
    elif end - start > MAX_PERIOD:
        bad("end", "A period may be at most 24 hours long.")
    elif run is not None:
        if start < run.started_at - CLOCK_SKEW:
            bad("start", "Is before the run started.")
        if run.ended_at is not None and end > run.ended_at + CLOCK_SKEW:
            bad("end", "Is after the run ended.")
    for field in ("allocated_gpu_seconds", "busy_gpu_seconds", "power_mean_watts"):
        value = item.get(field)
        if value is not None and (not Decimal(value).is_finite() or value < 0):
            bad(field, "Must be a finite number >= 0.")
    for field in ("samples", "memory_max_mib"):
        value = item.get(field)
        if value is not None and value < 0:
            bad(field, "Must be >= 0.")
    allocated, busy = item["allocated_gpu_seconds"], item.get("busy_gpu_seconds")
    busy_ok = busy is not None and f"reports[{index}].busy_gpu_seconds" not in errors
    if busy_ok and allocated.is_finite() and busy > allocated:
        bad("busy_gpu_seconds", "Must not exceed allocated_gpu_seconds.")
    if run is not None and end > start and allocated.is_finite():
        most = gpus[run.pk] * _seconds(end - start)
        # One unit of the last stored place over: a float product rounded to 6 places.
        if allocated > most + SIX_PLACES:
            bad(
                "allocated_gpu_seconds",
                f"Exceeds {gpus[run.pk]} GPUs x {_seconds(end - start)} s = {most}.",
            )
    return errors


class _NodeRuns(NamedTuple):
    """The reported runs open (or just ended) on a node, locked, with their GPUs there."""

    runs: dict[int, Run]
    gpus: dict[int, int]


def _node_runs_locked(node: Node, run_ids: set[int]) -> _NodeRuns:
    """Lock the rows of ``run_ids`` that ran on ``node``, so two reports of the same run
    apply one after the other; with the GPUs each holds on the node."""
    runs = {
        run.pk: run
        for run in Run.objects.select_for_update()
        .filter(pk__in=run_ids, run_nodes__node=node, cluster_id=node.cluster_id)
        .order_by("pk")
    }
    gpus = dict(RunNode.objects.filter(run_id__in=runs, node=node).values_list("run_id", "gpus"))
    return _NodeRuns(runs, gpus)


def _fresh_pieces(
    index: int, item: Mapping, run: Run, rows: dict[tuple[int, datetime], UtilizationHour]
) -> list[dict[str, Any]]:
    """The hour pieces of report item ``index`` not stored yet: a piece ending at or before
    what its row already holds is a retry; one that straddles it is refused."""
    fresh = []
    for piece in hour_pieces(
        start=item["start"],
        end=item["end"],
        allocated=item["allocated_gpu_seconds"],
        busy=item["busy_gpu_seconds"],
        samples=item.get("samples") or 0,
    ):
        row = rows.get((run.pk, piece["hour"]))
        if row is None or piece["start"] >= row.reported_until:
            fresh.append(piece)
        elif piece["end"] > row.reported_until:
            raise ValidationError(
                {
                    f"reports[{index}].start": [
                        "Overlaps a period already reported for this run "
                        f"(reported until {row.reported_until.isoformat()})."
                    ]
                }
            )
    return fresh


def _new_row(run: Run, node: Node, piece: dict[str, Any]) -> UtilizationHour:
    """The (unsaved) hour row a run's first piece in that hour starts."""
    return UtilizationHour(
        run=run,
        project_id=run.project_id,
        cluster_id=run.cluster_id,
        node=node,
        hour=piece["hour"],
        covered_from=piece["start"],
        reported_until=piece["start"],
    )


def utilization_report(*, node: Node, reports: Iterable[Mapping], now: datetime) -> dict:
    """Store what ``node``'s agent measured of its runs; all items or none.

    Each item: ``run`` (id), ``start``/``end`` (aware datetimes), ``allocated_gpu_seconds``,
    ``busy_gpu_seconds`` (None: no GPU telemetry), ``samples``, ``memory_max_mib`` and
    ``power_mean_watts`` (both optional). The run must be open, or ended within the last hour,
    on this node; allocated may not exceed the run's GPUs here x the period's seconds.

    A bad item raises ``ValidationError`` naming it (``reports[3].busy_gpu_seconds``) and
    nothing is stored. Periods of a run must arrive in time order: a period (hour part) ending
    at or before what its row already holds is skipped as a retry, never counted twice; one
    that straddles it is refused. Periods without
    telemetry are counted and otherwise ignored. Returns ``{"stored", "repeated",
    "no_telemetry"}`` (hour rows written, periods skipped as repeats, periods not measured).
    """
    items = list(reports)
    if not 1 <= len(items) <= MAX_REPORTS:
        raise ValidationError({"reports": [f"Give a list of 1 to {MAX_REPORTS:,} reports."]})
    with transaction.atomic():
        runs, gpus = _node_runs_locked(node, {item["run"] for item in items})
        errors: dict[str, list[str]] = {}
        for index, item in enumerate(items):
            errors.update(_check_item(index, item, runs, gpus, now))
        if errors:
            raise ValidationError(errors)
        rows = {
            (row.run_id, row.hour): row
            for row in UtilizationHour.objects.select_for_update().filter(
                run_id__in=runs, node=node, hour__gte=min(_hour_of(i["start"]) for i in items)
            )
        }
        order = sorted(range(len(items)), key=lambda i: (items[i]["run"], items[i]["start"]))
        repeated = no_telemetry = 0
        touched: set[tuple[int, datetime]] = set()
        for index in order:
            item = items[index]
            if item.get("busy_gpu_seconds") is None:
                no_telemetry += 1
                continue
            run = runs[item["run"]]
            fresh = _fresh_pieces(index, item, run, rows)
            if not fresh:
                repeated += 1
                continue
            for piece in fresh:
                key = (run.pk, piece["hour"])
                row = rows.get(key)
                if row is None:
                    row = rows[key] = _new_row(run, node, piece)
                _fold(row, piece, item)
                touched.add(key)
        for key in touched:
            rows[key].save()
    return {"stored": len(touched), "repeated": repeated, "no_telemetry": no_telemetry}


def _fold(row: UtilizationHour, piece: dict, item: Mapping) -> None:
    """Add one hour piece of a period to its row (in memory)."""
    power = item.get("power_mean_watts")
    if power is not None:
        # A time-weighted mean over the periods that reported power.
        if row.power_mean_watts is None or not row.covered_seconds:
            row.power_mean_watts = Decimal(power).quantize(Decimal("0.001"))
        else:
            total = row.covered_seconds + piece["seconds"]
            mean = (row.power_mean_watts * row.covered_seconds + power * piece["seconds"]) / total
            row.power_mean_watts = mean.quantize(Decimal("0.001"))
    memory = item.get("memory_max_mib")
    if memory is not None:
        row.memory_max_mib = max(memory, row.memory_max_mib or 0)
    row.allocated_gpu_seconds += piece["allocated"]
    row.busy_gpu_seconds += piece["busy"]
    row.samples += piece["samples"]
    row.covered_seconds += piece["seconds"]
    row.reported_until = piece["end"]
