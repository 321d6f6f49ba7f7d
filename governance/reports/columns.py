"""The columns both exports share, in order, with how to read each from a report row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from governance.selectors.reports import ReportRow, UsageReport

MILLIONTH = Decimal("0.000001")


@dataclass(frozen=True)
class Column:
    """One column: header, value of a row, and its kind (text, date, hours, seconds, money)."""

    header: str
    value: Callable[[ReportRow], object]
    kind: str


def _hours(seconds: Decimal) -> Decimal:
    return (seconds / Decimal(3600)).quantize(MILLIONTH)


def _maybe_hours(seconds: Decimal | None) -> Decimal | None:
    """GPU-hours as ``_hours``, or ``None`` (an empty cell) when nothing was measured."""
    return None if seconds is None else _hours(seconds)


def _seconds(seconds: Decimal) -> Decimal:
    # The ledger keeps GPU-seconds to the microsecond; a database's SUM may carry a longer
    # scale (SQLite gives 2196.94497600000), which a finance sheet would show as noise.
    return Decimal(seconds).quantize(MILLIONTH)


def report_columns(report: UsageReport) -> list[Column]:
    """The columns of ``report``'s level: names down to that level, then the figures.

    GPU-hours are rounded to the millionth; the GPU-seconds columns are the ledger's exact
    amounts (they add up to the ledger to the microsecond).
    """
    columns = [
        Column("Period start", lambda r: r.period_start, "date"),
        Column("Period end", lambda r: r.period_end, "date"),
        Column("Organization", lambda r: r.organization, "text"),
    ]
    if report.level in ("program", "project"):
        columns.append(Column("Program", lambda r: r.program, "text"))
    if report.level == "project":
        columns.append(Column("Project", lambda r: r.project, "text"))
        columns.append(Column("Cost centre", lambda r: r.cost_centre, "text"))
    columns += [
        Column("Cluster", lambda r: r.cluster, "text"),
        Column("GPU type", lambda r: r.gpu_type, "text"),
        Column("Budgeted GPU-hours", lambda r: _hours(r.budgeted_gpu_seconds), "hours"),
        Column("Burst GPU-hours", lambda r: _hours(r.burst_gpu_seconds), "hours"),
        Column("Free GPU-hours", lambda r: _hours(r.free_gpu_seconds), "hours"),
        Column("Total GPU-hours", lambda r: _hours(r.total_gpu_seconds), "hours"),
        Column(f"Cost ({report.currency or 'no rate'})", lambda r: r.cost, "money"),
        Column("Budgeted GPU-seconds", lambda r: _seconds(r.budgeted_gpu_seconds), "seconds"),
        Column("Burst GPU-seconds", lambda r: _seconds(r.burst_gpu_seconds), "seconds"),
        Column("Free GPU-seconds", lambda r: _seconds(r.free_gpu_seconds), "seconds"),
        Column("Total GPU-seconds", lambda r: _seconds(r.total_gpu_seconds), "seconds"),
        # Added last (a sheet that reads columns by position keeps working): from the agents'
        # telemetry, empty where nothing was measured; part of the time above, not extra.
        Column("GPU-hours allocated but idle", lambda r: _maybe_hours(r.idle_gpu_seconds), "hours"),
    ]
    return columns


def report_filename(report: UsageReport, extension: str) -> str:
    """``gpu-usage-2026-10-project.csv`` (a month) or ``gpu-usage-2026-10-03_2026-10-17-…``."""
    period = report.title.removeprefix("GPU usage ").replace(" to ", "_")
    cluster = f"-{report.cluster.slug}" if report.cluster else ""
    return f"gpu-usage-{period}-{report.level}{cluster}.{extension}"
