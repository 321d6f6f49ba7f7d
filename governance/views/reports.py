"""The finance usage report page and its CSV / XLSX downloads (finance and org admins).

Thin: the query is parsed by ``governance.reports.query``, the figures come from
``governance.selectors.reports.usage_report``, the files from ``governance.reports``. Anyone
without a finance or org admin role gets the 403 page; a program they cannot see is a 404;
bad input is shown next to the field it names (the page) or a 400 (the downloads).
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import NamedTuple

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path
from django.views.decorators.http import require_safe

from governance.reports.columns import report_filename
from governance.reports.csv_writer import report_csv
from governance.reports.query import (
    ReportQuery,
    report_for_query,
    report_period_asked,
    report_query_parse,
)
from governance.reports.xlsx_writer import report_xlsx
from governance.selectors.reports import LEVELS, UsageReport
from governance.views.common import visibility_of
from governance.views.report_rows import report_row_html

app_name = "reports"

ONE_DECIMAL = Decimal("0.1")
TWO_DECIMALS = Decimal("0.01")


def _number(value: Decimal | None, places: Decimal) -> str:
    """A figure as the page shows it: rounded half-up, thousands separated; "—" when absent.

    Formatting 600 rows by 5 cells here instead of with a template filter per cell is what
    keeps the month's report within its time budget.
    """
    if value is None:
        return "—"
    return f"{value.quantize(places, rounding=ROUND_HALF_UP):,}"


def _cells(row) -> dict[str, str]:
    """The formatted figures of one report row (or the totals)."""
    return {
        "budgeted": _number(row.budgeted_gpu_hours, ONE_DECIMAL),
        "burst": _number(row.burst_gpu_hours, ONE_DECIMAL),
        "free": _number(row.free_gpu_hours, ONE_DECIMAL),
        "total": _number(row.total_gpu_hours, ONE_DECIMAL),
        "cost": _number(row.cost, TWO_DECIMALS),
        "idle": _number(row.idle_gpu_hours, ONE_DECIMAL),
    }


XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


class _Asked(NamedTuple):
    """The report a request asks for: ``report`` and ``query`` are None when the input was
    refused, and ``errors`` then names each bad field."""

    report: UsageReport | None
    query: ReportQuery | None
    errors: dict[str, list[str]]


def _report(request: HttpRequest) -> _Asked:
    """The report the request asks for, or the reasons its input was refused."""
    vis = visibility_of(request)
    if not vis.can_view_reports:
        raise PermissionDenied("Usage reports are for finance and org admins.")
    try:
        # The page (and its downloads) open on the month so far: last month is often empty
        # on a new installation, and this month is what people check during it.
        query = report_query_parse(params=request.GET, visibility=vis, default_month="current")
    except ValidationError as exc:
        return _Asked(None, None, exc.message_dict)
    program = None
    if query.program_id is not None:
        program = get_object_or_404(vis.programs(), pk=query.program_id)
    report = report_for_query(query=query, visibility=vis, program=program)
    return _Asked(report, query, {})


@login_required
@require_safe
def usage(request: HttpRequest) -> HttpResponse:
    """The report as a table: period (month or range), level and cluster pickers, downloads."""
    report, query, errors = _report(request)
    vis = visibility_of(request)
    context = {
        "report": report,
        "rows": [report_row_html(row, _cells(row), level=report.level) for row in report.rows]
        if report
        else [],
        "totals": _cells(report.totals) if report else None,
        "query": query,
        "period": _period_shown(request, query),
        "errors": errors,
        "params": request.GET,
        "levels": LEVELS,
        "clusters": list(vis.clusters().order_by("name")),
        "querystring": request.GET.urlencode(),
    }
    return render(request, "reports/usage.html", context, status=400 if errors else 200)


def _period_shown(request: HttpRequest, query: ReportQuery | None) -> str:
    """Which period's fields the form shows: the query's, or when it was refused, what the
    address asked for, so the bad field stays in view."""
    if query is not None:
        return query.period
    return report_period_asked(request.GET) or "month"


def _download(request: HttpRequest, extension: str) -> HttpResponse:
    report, _query, errors = _report(request)
    if errors:
        text = "\n".join(f"{field}: {' '.join(msgs)}" for field, msgs in errors.items())
        return HttpResponse(text + "\n", status=400, content_type="text/plain; charset=utf-8")
    if extension == "csv":
        response = HttpResponse(report_csv(report=report), content_type="text/csv; charset=utf-8")
    else:
        response = HttpResponse(report_xlsx(report=report), content_type=XLSX_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{report_filename(report, extension)}"'
    return response


@login_required
@require_safe
def usage_csv(request: HttpRequest) -> HttpResponse:
    """The same report as a CSV file."""
    return _download(request, "csv")


@login_required
@require_safe
def usage_xlsx(request: HttpRequest) -> HttpResponse:
    """The same report as an XLSX workbook (number formats, a totals row)."""
    return _download(request, "xlsx")


urlpatterns = [
    path("usage/", usage, name="usage"),
    path("usage.csv", usage_csv, name="usage-csv"),
    path("usage.xlsx", usage_xlsx, name="usage-xlsx"),
]
