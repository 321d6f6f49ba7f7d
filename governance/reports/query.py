"""Parsing the report's query parameters (page and API share it), naming the bad field."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.core.exceptions import ValidationError
from django.utils import timezone

from governance.models import Cluster, Program
from governance.parsing import calendar_day, calendar_month, whole_number
from governance.selectors.reports import (
    LEVELS,
    UsageReport,
    report_period_of_month,
    report_validate_period,
    usage_report,
)
from governance.services.reports import previous_month, usage_days_refresh_all

FORMATS = ("json", "csv", "xlsx")


@dataclass
class ReportQuery:
    """What the caller asked for: the period (both days included), level, cluster, program."""

    start: date
    end: date
    level: str
    cluster: Cluster | None
    program_id: int | None
    period: str  # "month" or "range"
    month: str  # YYYY-MM of ``start`` (for the month picker)


def _date(value: str, field: str) -> date:
    day = calendar_day(value)
    if day is None:
        raise ValidationError({field: [f"Enter a date as YYYY-MM-DD, not {value[:40]!r}."]})
    return day


def _month(value: str) -> date:
    month = calendar_month(value)
    if month is None:
        raise ValidationError({"month": [f"Enter a month as YYYY-MM, not {value[:40]!r}."]})
    return month


def _positive_int(value: str, field: str, what: str) -> int:
    number = whole_number(value.strip())
    if number is None or number < 1:
        raise ValidationError({field: [f"Enter the id of a {what} (a whole number)."]})
    return number


def report_period_asked(params) -> str | None:
    """Which period the parameters ask for: ``period`` (month or range), else a range when
    ``start`` or ``end`` is given and a month otherwise; None for a ``period`` that is
    neither. The page's form shows that period's fields, also when the rest is refused."""
    period = (params.get("period") or "").strip()
    if period:
        return period if period in ("month", "range") else None
    return "range" if params.get("start") or params.get("end") else "month"


def report_query_parse(
    *, params, visibility, now: datetime | None = None, default_month: str = "previous"
) -> ReportQuery:
    """Turn query parameters into a ``ReportQuery`` or raise ``ValidationError`` naming the field.

    Period: ``start`` and ``end`` (YYYY-MM-DD, both included) or ``month`` (YYYY-MM); with
    neither, ``default_month``: the last complete month (``previous``: what the API and the
    monthly mail report) or the month so far (``current``: what the page opens on). ``period=month`` or ``period=range`` says which of the
    page's pickers to use when both are filled. ``level``: organization, program or project
    (default project). ``cluster``: id of a cluster the user sees (anything else is refused
    on ``cluster``, hidden or missing alike). ``program``: an id; the caller resolves it
    through the visibility selector (a 404 when hidden).
    """
    period = report_period_asked(params)
    if period is None:
        raise ValidationError({"period": ["Must be month or range."]})
    start_text, end_text = params.get("start") or "", params.get("end") or ""
    month_text = params.get("month") or ""
    if period == "range":
        start = _date(start_text, "start") if start_text else None
        end = _date(end_text, "end") if end_text else None
        report_validate_period(start=start, end=end)
    else:
        if month_text:
            month = _month(month_text)
        elif default_month == "current":
            month = (now or timezone.now()).astimezone(UTC).date().replace(day=1)
        else:
            month = previous_month(now or timezone.now())
        start, end = report_period_of_month(month)
    level = (params.get("level") or "project").strip()
    if level not in LEVELS:
        raise ValidationError(
            {"level": [f"Must be one of {', '.join(LEVELS)}, not {level[:40]!r}."]}
        )
    cluster = None
    cluster_text = (params.get("cluster") or "").strip()
    if cluster_text:
        pk = _positive_int(cluster_text, "cluster", "cluster")
        cluster = visibility.clusters().filter(pk=pk).first()
        if cluster is None:
            raise ValidationError({"cluster": [f"No cluster with id {pk}."]})
    program_id = None
    program_text = (params.get("program") or "").strip()
    if program_text:
        program_id = _positive_int(program_text, "program", "program")
    return ReportQuery(
        start=start,
        end=end,
        level=level,
        cluster=cluster,
        program_id=program_id,
        period=period,
        month=f"{start:%Y-%m}",
    )


def report_for_query(*, query: ReportQuery, visibility, program: Program | None) -> UsageReport:
    """The usage report ``query`` asks for, narrowed to ``program`` (which the caller resolved
    from ``query.program_id``: the page answers 404, the API names the field)."""
    usage_days_refresh_all()  # the daily cache: closed days not rolled yet (cheap when none)
    return usage_report(
        visibility=visibility,
        start=query.start,
        end=query.end,
        level=query.level,
        cluster=query.cluster,
        program=program,
    )
