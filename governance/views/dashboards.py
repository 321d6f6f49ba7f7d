"""Dashboards for managers and PIs: owed vs delivered, why the queue is ordered this way,
cluster health (the metrics pyramid).

Thin views: they read the query string (``DashboardFilterForm``), call one selector per page
(``governance.selectors.usage``, ``.fairshare``, ``.health``) scoped by the user's
visibility, and hand its rows to the pure figure builders (``governance.figures_dashboards``).
Bad input never fails a page: a malformed date, a start after the end or an unknown cluster
is said in a message and the page shows the default instead. A node of the tree the user
cannot see is a 404. Periods are whole UTC days (the rollup is kept per UTC hour).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_safe

from governance.figures import figure_json
from governance.figures_dashboards import (
    delivery_bars,
    delivery_timeseries,
    fairshare_lines,
    health_pyramid,
    health_utilization,
    nodes_by_state_bar,
)
from governance.parsing import node_ref
from governance.selectors.fairshare import fairshare_ranking
from governance.selectors.health import cluster_health
from governance.selectors.health_utilization import cluster_utilization
from governance.selectors.telemetry import delivery_telemetry
from governance.selectors.usage import (
    UsageRow,
    first_accounted_hour,
    usage_by_tree_node,
    usage_timeseries,
)
from governance.selectors.visibility import Visibility
from governance.views.common import NODE_KINDS, visibility_of
from governance.views.dashboard_filters import (
    HISTORY_DAYS,
    PERIODS,
    Filters,
    Period,
    query_setting,
    query_with,
    read_filters,
)
from governance.views.dashboard_lines import DeliveryLine, RankLine, ratio_pct
from governance.views.dashboard_rows import delivery_row_html, rank_row_html
from governance.views.utilization_rows import project_utilization_row_html

# The project-order card lists the first projects; the table has every position.
ORDER_SHOWN = 20


class _Page(NamedTuple):
    """What every dashboard starts from: the viewer's visibility, the filters read from the
    query string and the template context so far."""

    visibility: Visibility
    filters: Filters
    context: dict


def _dashboard(page: str, choices: dict, *, default_period: str = "7d"):
    """A dashboard view: signed in, GET or HEAD only. The wrapped ``view(request, started)``
    runs once a cluster is chosen, with the visibility, the filters and the context so far
    (the filters, the page's ``choices`` and its name); with no cluster to show the page's
    template renders with the filters alone."""

    def wrap(view):
        @login_required
        @require_safe
        @functools.wraps(view)
        def dashboard(request: HttpRequest) -> HttpResponse:
            vis = visibility_of(request)
            filters = read_filters(request, default_period=default_period)
            context = {"filters": filters, **choices, "page": page}
            if filters.cluster is None:
                return render(request, f"dashboards/{page}.html", context)
            return view(request, _Page(vis, filters, context))

        return dashboard

    return wrap


class _SeriesSpan(NamedTuple):
    """The time series' start, end and bucket ("hour" or "day")."""

    start: datetime
    end: datetime
    bucket: str


def _series_span(period: Period, cluster) -> _SeriesSpan:
    """The time series' start, end and bucket: by the hour from the first accounted hour to
    the hour in progress when the period holds under two days of figures (a new
    installation: daily bars would be one or two stubs), else the period's own."""
    start = first_accounted_hour(cluster=cluster, until=period.end)
    if start is not None and start > period.start:
        hour = timedelta(hours=1)
        now = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        return _SeriesSpan(start, min(period.end, max(now + hour, start + hour)), "hour")
    return _SeriesSpan(period.start, period.end, period.bucket)


def _parse_node(value: str) -> tuple[str, int] | None:
    """``"program-12"`` → ``("program", 12)``; anything else → None."""
    return node_ref(value)


class _Focus(NamedTuple):
    """The node the delivery page is about (None: the top nodes), the teams its bars compare
    and the depth of the top rows (the table indents from it)."""

    row: UsageRow | None
    teams: list[UsageRow]
    top: int


def _delivery_focus(request: HttpRequest, rows: list[UsageRow]) -> _Focus:
    """The node asked for (``?node=``; a 404 for one not among ``rows``), else the only top
    node; its teams are its children, the project itself, or the top nodes."""
    by_key = {row.key: row for row in rows}
    focus_key = None
    if request.GET.get("node"):
        focus_key = _parse_node(request.GET["node"])
        if focus_key not in by_key:
            raise Http404("No such node among those you see.")
    top = min((row.depth for row in rows), default=0)
    tops = [row for row in rows if row.depth == top]
    if focus_key is None and len(tops) == 1:
        focus_key = tops[0].key
    focus = by_key.get(focus_key)
    if focus is None:
        teams = tops
    elif focus.kind == "project":
        teams = [focus]
    else:
        teams = [row for row in rows if row.parent == focus.key]
    return _Focus(focus, teams, top)


@_dashboard("delivery", {"periods": PERIODS})
def delivery(request: HttpRequest, started: _Page) -> HttpResponse:
    """Owed vs delivered: every node the user wholly sees, a bar per team, a time series."""
    vis, filters, context = started
    period = filters.period
    rows = usage_by_tree_node(
        visibility=vis, cluster=filters.cluster, start=period.start, end=period.end
    )
    focus, teams, top = _delivery_focus(request, rows)
    node = None
    if focus is not None:
        node = NODE_KINDS[focus.kind].objects.get(pk=focus.id)
    series_start, series_end, bucket = _series_span(period, filters.cluster)
    points = usage_timeseries(
        visibility=vis,
        cluster=filters.cluster,
        start=series_start,
        end=series_end,
        node=node,
        bucket=bucket,
    )
    bars = delivery_bars(teams)
    focus_url = query_setting(request, "node")
    telemetry = delivery_telemetry(
        rows=rows, cluster=filters.cluster, start=period.start, end=period.end
    )
    lines = [
        DeliveryLine(
            row=row,
            level=row.depth - top,
            focus_url=focus_url(f"{row.kind}-{row.id}"),
            telemetry=telemetry.get(row.key),
        )
        for row in rows
    ]
    focus_key = focus.key if focus else None
    for line in lines:
        line.html = delivery_row_html(line, focus_key=focus_key)
    context.update(
        {
            "lines": lines,
            "focus": focus,
            "focus_line": next((line for line in lines if line.row is focus), None),
            "teams": teams,
            "has_usage": any(r.total_gpu_seconds or r.owed_gpu_seconds for r in rows),
            "bars": figure_json(bars),
            "bars_height": bars["layout"]["height"],
            "timeseries": figure_json(
                delivery_timeseries(points, bucket=bucket, now=timezone.now())
            ),
            "all_url": query_with(request, node=None),
            "has_telemetry": bool(telemetry),
            "focus_chosen": bool(request.GET.get("node")),
        }
    )
    return render(request, "dashboards/delivery.html", context)


@_dashboard("fairshare", {"history_days": HISTORY_DAYS})
def fairshare(request: HttpRequest, started: _Page) -> HttpResponse:
    """Why the queue is ordered this way: the engine's Fair Tree ranking, now and per day."""
    vis, filters, context = started
    view = fairshare_ranking(visibility=vis, cluster=filters.cluster, days=filters.days)
    parents = [row for row in view.rows if row.kind != "project" and view.children_of(row.key)]
    chart_key = None
    if request.GET.get("parent"):
        chart_key = _parse_node(request.GET["parent"])
        if chart_key is None or view.row(chart_key) is None:
            raise Http404("No such node among those you see.")
    if chart_key is None and parents:
        # The deepest level the viewer manages: their program for a program manager.
        whole = [row for row in parents if row.whole]
        chart_key = (whole[0] if whole else parents[-1]).key
    chart_parent = view.row(chart_key) if chart_key else None
    children = view.children_of(chart_key) if chart_key else []
    # Each project with its program, to say why it sits where it does.
    order = [(row, view.row(row.parent)) for row in view.project_order]
    chart_url = query_setting(request, "parent")
    lines = [RankLine(row=row, chart_url=chart_url(f"{row.kind}-{row.id}")) for row in view.rows]
    focus_key = chart_parent.key if chart_parent else None
    for line in lines:
        line.html = rank_row_html(line, focus_key=focus_key, days=filters.days)
    context.update(
        {
            "view": view,
            "lines": lines,
            "parents": parents,
            "chart_parent": chart_parent,
            "children": children,
            "chart": figure_json(fairshare_lines(view.instants, children)),
            "window_days": view.window_seconds / 86400,
            "order_preview": order[:ORDER_SHOWN],
            "order_more": max(0, len(order) - ORDER_SHOWN),
        }
    )
    return render(request, "dashboards/fairshare.html", context)


@_dashboard("health", {"periods": PERIODS}, default_period="30d")
def health(request: HttpRequest, started: _Page) -> HttpResponse:
    """Cluster health: availability, occupancy, impact and utilization per day; utilization
    per project and the runs marked idle; nodes and drains now."""
    vis, filters, context = started
    report = cluster_health(
        visibility=vis,
        cluster=filters.cluster,
        start=filters.period.start,
        end=filters.period.end,
    )
    totals = report.totals
    use = cluster_utilization(
        visibility=vis,
        cluster=filters.cluster,
        start=filters.period.start,
        end=filters.period.end,
        ledger_by_day={d.day.date(): d.allocated_gpu_seconds for d in report.days},
    )
    days_with_data = [
        d
        for d in reversed(report.days)
        if d.known_hours or d.allocated_gpu_seconds or d.owed_gpu_seconds
    ]
    context.update(
        {
            "report": report,
            "totals": totals,
            "tiles": {
                "availability": ratio_pct(totals.availability),
                "occupancy": ratio_pct(totals.occupancy),
                "impact": ratio_pct(totals.impact),
                "hourly_impact": ratio_pct(totals.hourly_impact),
            },
            "days_with_data": days_with_data,
            "days_without_data": len(report.days) - len(days_with_data),
            "pyramid": figure_json(health_pyramid(report.days)),
            "states": figure_json(nodes_by_state_bar(report.nodes_by_state)),
            "has_nodes": any(c.nodes for c in report.nodes_by_state),
            "use": use,
            "use_tile": ratio_pct(use.total.utilization),
            "use_coverage": ratio_pct(use.total.coverage),
            "use_chart": figure_json(health_utilization(use.days)),
            "use_rows": [project_utilization_row_html(row) for row in use.projects],
        }
    )
    return render(request, "dashboards/health.html", context)


@login_required
@require_safe
def index(request: HttpRequest) -> HttpResponse:
    """``/dashboards/``: the owed-vs-delivered page."""
    return redirect("dashboards:delivery")


app_name = "dashboards"
urlpatterns = [
    path("", index, name="index"),
    path("delivery/", delivery, name="delivery"),
    path("fairshare/", fairshare, name="fairshare"),
    path("health/", health, name="health"),
]
