"""The query string of a dashboard: cluster, period and history length, read and corrected.

Bad input never fails a page: a malformed date, a start after the end or an unknown cluster
is said in a message and the page shows the default instead. Periods are whole UTC days
(the rollup is kept per UTC hour). Also the links that change one choice of the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpRequest
from django.utils import timezone

from governance.fields import DayFormField
from governance.models import Cluster
from governance.views.common import visibility_of

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


def read_filters(request: HttpRequest, *, default_period: str = "7d") -> Filters:
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


def query_with(request: HttpRequest, **changes) -> str:
    """The current query string with ``changes`` applied (``None`` removes a key)."""
    query = request.GET.copy()
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else ""


def query_setting(request: HttpRequest, name: str):
    """A function ``value`` → the current query string with ``name`` set to ``value`` (last):
    one copy of the query for a table's hundreds of links, not one per row."""
    query = request.GET.copy()
    query.pop(name, None)
    encoded = query.urlencode()
    prefix = f"?{encoded}&" if encoded else "?"
    return lambda value: prefix + urlencode({name: value})
