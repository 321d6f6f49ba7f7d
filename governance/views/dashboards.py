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

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_safe

from governance.fields import DayFormField
from governance.figures import figure_json
from governance.figures_dashboards import (
    delivery_bars,
    delivery_timeseries,
    fairshare_lines,
    health_pyramid,
    health_utilization,
    nodes_by_state_bar,
)
from governance.models import Cluster, Organization, Program, Project
from governance.parsing import node_ref
from governance.selectors.fairshare import FairShareRow, fairshare_ranking
from governance.selectors.health import cluster_health
from governance.selectors.health_utilization import cluster_utilization
from governance.selectors.telemetry import Telemetry, delivery_telemetry
from governance.selectors.usage import (
    UsageRow,
    first_accounted_hour,
    usage_by_tree_node,
    usage_timeseries,
)
from governance.templatetags.govfmt import gpus, pct
from governance.views.common import visibility_of
from governance.views.dashboard_rows import delivery_row_html, rank_row_html
from governance.views.utilization_rows import gpu_hours, project_utilization_row_html

DAY = timedelta(days=1)
MAX_PERIOD_DAYS = 366
# Up to this many days the time series is drawn per hour, beyond it per day.
HOURLY_UP_TO_DAYS = 3
PERIODS = [
    ("7d", "Last 7 days"),
    ("30d", "Last 30 days"),
    ("month", "This month"),
    ("last_month", "Last month"),
    ("custom", "Custom"),
]
HISTORY_DAYS = [(7, "7 days"), (14, "14 days"), (30, "30 days")]
# The project-order card lists the first projects; the table has every position.
ORDER_SHOWN = 20
NODE_MODELS = {"organization": Organization, "program": Program, "project": Project}


class DashboardFilterForm(forms.Form):
    """The query string of a dashboard: cluster, period (or custom dates), history length."""

    cluster = forms.IntegerField(required=False)
    period = forms.ChoiceField(choices=PERIODS, required=False)
    start = DayFormField(
        required=False, error_messages={"invalid": "Enter the start as YYYY-MM-DD."}
    )
    end = DayFormField(required=False, error_messages={"invalid": "Enter the end as YYYY-MM-DD."})
    days = forms.TypedChoiceField(choices=HISTORY_DAYS, coerce=int, required=False)


@dataclass
class Period:
    """A period of whole UTC days: ``[start, end)``, how to bucket it, and its label."""

    key: str
    start: datetime
    end: datetime
    label: str
    first_day: date
    last_day: date

    @property
    def bucket(self) -> str:
        """ "hour" for short periods, else "day"."""
        return "hour" if self.end - self.start <= DAY * HOURLY_UP_TO_DAYS else "day"


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _period(key: str, today: date, start: date | None = None, end: date | None = None) -> Period:
    """The period ``key`` as of ``today`` (custom: ``start``..``end`` inclusive, checked)."""
    if key == "custom":
        first, last = start, end
    elif key == "30d":
        first, last = today - timedelta(days=29), today
    elif key == "month":
        first, last = today.replace(day=1), today
    elif key == "last_month":
        last = today.replace(day=1) - DAY
        first = last.replace(day=1)
    else:
        key, first, last = "7d", today - timedelta(days=6), today
    label = dict(PERIODS)[key] if key != "custom" else "Custom"
    return Period(
        key=key,
        start=_midnight(first),
        end=_midnight(last) + DAY,
        label=f"{label}: {first:%d %b %Y} to {last:%d %b %Y}",
        first_day=first,
        last_day=last,
    )


@dataclass
class Filters:
    """What a dashboard shows after reading (and correcting) the query string."""

    cluster: Cluster | None
    clusters: list[Cluster]
    period: Period
    days: int


def _filters(request: HttpRequest, *, default_period: str = "7d") -> Filters:
    """Read cluster, period and history length; say what was wrong and fall back to defaults."""
    vis = visibility_of(request)
    clusters = list(vis.clusters().select_related("organization").order_by("name", "id"))
    form = DashboardFilterForm(request.GET)
    form.is_valid()
    data, errors = form.cleaned_data, form.errors
    for name in ("start", "end"):
        if name in errors:
            messages.warning(request, f"{errors[name][0]} Showing the default period instead.")
    if "cluster" in errors or "period" in errors or "days" in errors:
        messages.warning(request, "Some choices in the address were not understood; ignored.")
    cluster = clusters[0] if clusters else None
    wanted = data.get("cluster")
    if wanted is not None:
        match = next((c for c in clusters if c.pk == wanted), None)
        if match is None and clusters:
            messages.warning(
                request, f"No cluster {wanted} among yours; showing {clusters[0].name}."
            )
        cluster = match or cluster

    today = timezone.now().astimezone(UTC).date()
    key = data.get("period") or default_period
    period = _period(default_period, today)
    if key == "custom":
        start, end = data.get("start"), data.get("end")
        if "start" in errors or "end" in errors:
            pass  # already said
        elif start is None or end is None:
            messages.warning(request, "A custom period needs a start and an end date.")
        elif start > end:
            messages.warning(
                request,
                f"The start ({start:%Y-%m-%d}) is after the end ({end:%Y-%m-%d}); "
                "showing the default period instead.",
            )
        elif (end - start).days + 1 > MAX_PERIOD_DAYS:
            messages.warning(
                request,
                f"A period can be at most {MAX_PERIOD_DAYS} days; showing the default instead.",
            )
        elif start > today:
            messages.warning(request, "That period has not started yet; showing the default.")
        else:
            period = _period("custom", today, start, min(end, today))
    else:
        period = _period(key, today)
    return Filters(cluster=cluster, clusters=clusters, period=period, days=data.get("days") or 14)


def _ratio_pct(ratio) -> Decimal | None:
    """A ratio (0..1) as a percent for the ``pct`` filter; ``None`` stays ``None``."""
    return None if ratio is None else ratio * 100


@dataclass
class DeliveryLine:
    """One row of the owed-vs-delivered table: the selector's row, indented, with links.

    The cells are formatted once here (GPU-hours with thousands separators, percents with
    two decimals): a table of 300 projects renders several times faster than with a
    template filter per cell.
    """

    row: UsageRow
    level: int
    focus_url: str
    telemetry: Telemetry | None = None  # the agents' measure; None: no telemetry at all
    html: str = field(default="", init=False)  # the table row (``dashboard_rows``)

    def __post_init__(self) -> None:
        row = self.row
        self.entitled = gpus(row.entitled_gpu_hours)
        self.owed = gpus(row.owed_gpu_hours)
        self.delivered = gpus(row.charged_gpu_hours)
        self.burst = gpus(row.burst_gpu_hours)
        self.unbudgeted = gpus(row.unbudgeted_gpu_hours)
        self.delivery = pct(self.delivery_pct) if self.delivery_pct is not None else ""
        self.hourly = pct(self.hourly_delivery_pct) if self.hourly_delivery_pct is not None else ""
        ratio = self.delivery_pct
        self.ratio_class = "" if ratio is None or ratio >= 95 else ("mid" if ratio >= 90 else "low")
        self.idle = "" if self.telemetry is None else gpu_hours(self.telemetry.idle_gpu_hours)

    @property
    def delivery_pct(self) -> Decimal | None:
        return _ratio_pct(self.row.delivery_ratio)

    @property
    def hourly_delivery_pct(self) -> Decimal | None:
        return _ratio_pct(self.row.hourly_delivery_ratio)


def _query(request: HttpRequest, **changes) -> str:
    """The current query string with ``changes`` applied (``None`` removes a key)."""
    query = request.GET.copy()
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else ""


def _query_setting(request: HttpRequest, name: str):
    """A function ``value`` → the current query string with ``name`` set to ``value`` (last):
    one copy of the query for a table's hundreds of links, not one per row."""
    query = request.GET.copy()
    query.pop(name, None)
    encoded = query.urlencode()
    prefix = f"?{encoded}&" if encoded else "?"
    return lambda value: prefix + urlencode({name: value})


def _series_span(period: Period, cluster) -> tuple[datetime, datetime, str]:
    """The time series' start, end and bucket: by the hour from the first accounted hour to
    the hour in progress when the period holds under two days of figures (a new
    installation: daily bars would be one or two stubs), else the period's own."""
    start = first_accounted_hour(cluster=cluster, until=period.end)
    if start is not None and start > period.start:
        hour = timedelta(hours=1)
        now = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        return start, min(period.end, max(now + hour, start + hour)), "hour"
    return period.start, period.end, period.bucket


def _parse_node(value: str) -> tuple[str, int] | None:
    """``"program-12"`` → ``("program", 12)``; anything else → None."""
    return node_ref(value)


@login_required
@require_safe
def delivery(request: HttpRequest) -> HttpResponse:
    """Owed vs delivered: every node the user wholly sees, a bar per team, a time series."""
    vis = visibility_of(request)
    filters = _filters(request)
    context = {"filters": filters, "periods": PERIODS, "page": "delivery"}
    if filters.cluster is None:
        return render(request, "dashboards/delivery.html", context)
    period = filters.period
    rows = usage_by_tree_node(
        visibility=vis, cluster=filters.cluster, start=period.start, end=period.end
    )
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
    node = None
    if focus is not None:
        node = NODE_MODELS[focus.kind].objects.get(pk=focus.id)
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
    focus_url = _query_setting(request, "node")
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
            "all_url": _query(request, node=None),
            "has_telemetry": bool(telemetry),
            "focus_chosen": bool(request.GET.get("node")),
        }
    )
    return render(request, "dashboards/delivery.html", context)


@dataclass
class RankLine:
    """One row of the fair-share table, with its trend over the history (cells formatted)."""

    row: FairShareRow
    chart_url: str
    html: str = field(default="", init=False)  # the table row (``dashboard_rows``)

    def __post_init__(self) -> None:
        row = self.row
        self.share = "" if row.share is None else pct(row.share)
        self.usage = "" if row.usage_gpu_hours is None else gpus(row.usage_gpu_hours)
        self.usage_share = "" if row.usage_share is None else pct(row.usage_share)
        self.metric = "" if row.metric is None else f"{row.metric:,.2f}"
        self.position = f"#{row.order_position}" if row.order_position else ""
        self.rank = str(row.sibling_rank) if row.sibling_rank else ""
        change = self.rank_change
        self.change = (
            "" if change is None else ("up" if change > 0 else "down" if change else "same")
        )

    @property
    def rank_then(self) -> int | None:
        """The sibling rank at the first instant of the history."""
        return self.row.rank_history[0] if self.row.rank_history else None

    @property
    def rank_change(self) -> int | None:
        """Places moved up (positive) or down since the first instant; None if unknown."""
        if self.rank_then is None or self.row.sibling_rank is None:
            return None
        return self.rank_then - self.row.sibling_rank

    @property
    def rank_change_abs(self) -> int | None:
        """Places moved, without the direction."""
        return None if self.rank_change is None else abs(self.rank_change)


@login_required
@require_safe
def fairshare(request: HttpRequest) -> HttpResponse:
    """Why the queue is ordered this way: the engine's Fair Tree ranking, now and per day."""
    vis = visibility_of(request)
    filters = _filters(request)
    context = {"filters": filters, "history_days": HISTORY_DAYS, "page": "fairshare"}
    if filters.cluster is None:
        return render(request, "dashboards/fairshare.html", context)
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
    chart_url = _query_setting(request, "parent")
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


@login_required
@require_safe
def health(request: HttpRequest) -> HttpResponse:
    """Cluster health: availability, occupancy, impact and utilization per day; utilization
    per project and the runs marked idle; nodes and drains now."""
    vis = visibility_of(request)
    filters = _filters(request, default_period="30d")
    context = {"filters": filters, "periods": PERIODS, "page": "health"}
    if filters.cluster is None:
        return render(request, "dashboards/health.html", context)
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
                "availability": _ratio_pct(totals.availability),
                "occupancy": _ratio_pct(totals.occupancy),
                "impact": _ratio_pct(totals.impact),
                "hourly_impact": _ratio_pct(totals.hourly_impact),
            },
            "days_with_data": days_with_data,
            "days_without_data": len(report.days) - len(days_with_data),
            "pyramid": figure_json(health_pyramid(report.days)),
            "states": figure_json(nodes_by_state_bar(report.nodes_by_state)),
            "has_nodes": any(c.nodes for c in report.nodes_by_state),
            "use": use,
            "use_tile": _ratio_pct(use.total.utilization),
            "use_coverage": _ratio_pct(use.total.coverage),
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
