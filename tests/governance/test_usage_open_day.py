"""The daily usage cache's open day: the hours of the day in progress that accounting will not
change again are kept as one row per project (``UsageDay.through``), and every figure read
through ``usage_sources`` is the same as from the hourly rows alone.

Hourly rows are written straight into the rollup (``UsageHour``), the cache is made by the
production refresh, and each figure is compared with the same figure read before any cache
existed — no expected number comes from the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.models import UsageDay, UsageDayCursor
from governance.selectors.usage import usage_by_tree_node, usage_sources, usage_timeseries
from governance.selectors.visibility import user_visibility
from governance.services.reports import usage_days_refresh, usage_days_reopen
from scheduler.models import AccountingCursor, UsageHour
from scheduler.selectors.usage import usage_window_by_project

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the daily cache is made in PostgreSQL only"
    ),
]

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
D0 = datetime(2026, 10, 5, tzinfo=UTC)  # the first of three days of hourly rows
HOURS = 3 * 24

amounts = st.decimals(min_value=0, max_value=3600 * 8, places=6, allow_nan=False)


def write_hours(personas, rows) -> None:
    """``rows``: (project index, hour index, budgeted, burst, free, entitled, demand)."""
    projects = personas.projects
    UsageHour.objects.bulk_create(
        [
            UsageHour(
                project=projects[p],
                cluster=personas.cluster,
                hour=D0 + HOUR * h,
                budgeted_gpu_seconds=b,
                burst_gpu_seconds=u,
                free_gpu_seconds=f,
                entitled_gpu_seconds=e,
                demand_gpu_seconds=d,
            )
            for p, h, b, u, f, e, d in rows
        ]
    )


def account_until(cluster, at: datetime) -> None:
    AccountingCursor.objects.update_or_create(cluster=cluster, defaults={"accounted_until": at})


def figures(personas, start: datetime, end: datetime):
    """Every figure the dashboards take from ``usage_sources`` for ``[start, end)``."""
    visibility = user_visibility(user=personas.finance)
    tree = [
        (row.key, row.total_gpu_seconds, row.owed_gpu_seconds, row.owed_delivered_gpu_seconds,
         row.hourly_owed_delivered_gpu_seconds, row.unbudgeted_gpu_seconds)
        for row in usage_by_tree_node(
            visibility=visibility, cluster=personas.cluster, start=start, end=end
        )
    ]  # fmt: skip
    days = [
        (p.start, p.delivered_gpu_seconds, p.owed_gpu_seconds, p.entitled_gpu_seconds)
        for p in usage_timeseries(
            visibility=visibility, cluster=personas.cluster, start=start, end=end, bucket="day"
        )
    ]
    return tree, days


# (project index, hour index, budgeted, burst, free, entitled, demand), one per project-hour.
hour_rows = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, HOURS - 1), *[amounts] * 5),
    min_size=1,
    max_size=40,
    unique_by=lambda r: (r[0], r[1]),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=hour_rows,
    accounted=st.integers(24 * 60, 3 * 24 * 60 + 90).map(lambda m: D0 + timedelta(minutes=m)),
    period=st.tuples(st.integers(0, HOURS), st.integers(1, HOURS)),
)
def test_figures_are_the_same_with_the_open_day_cached(personas, rows, accounted, period):
    UsageDay.objects.all().delete()
    UsageDayCursor.objects.all().delete()
    UsageHour.objects.all().delete()
    AccountingCursor.objects.all().delete()
    write_hours(personas, rows)
    first, length = period
    start = D0 + HOUR * min(first, HOURS - 1)
    end = min(start + HOUR * length, D0 + HOUR * HOURS)
    window_now = D0 + HOUR * HOURS
    hourly = figures(personas, start, end)
    hourly_window = usage_window_by_project(
        cluster=personas.cluster, now=window_now, window_seconds=2 * 86400
    )

    account_until(personas.cluster, accounted)
    usage_days_refresh(cluster=personas.cluster)
    cursor = UsageDayCursor.objects.get(cluster=personas.cluster)
    final = (accounted - HOUR).replace(minute=0)
    assert cursor.until == final.date()
    if final > datetime.combine(final.date(), datetime.min.time(), tzinfo=UTC):
        assert cursor.open_through == final  # the open day is cached up to ``final``
    else:
        assert cursor.open_through is None  # at midnight there is nothing of it yet
    assert figures(personas, start, end) == hourly
    assert (
        usage_window_by_project(cluster=personas.cluster, now=window_now, window_seconds=2 * 86400)
        == hourly_window
    )


def test_a_day_is_read_from_its_cached_hours_and_the_hours_after_them(personas):
    write_hours(
        personas,
        [
            (0, 24 + 3, Decimal(3600), 0, 0, Decimal(7200), Decimal(3600)),
            (0, 24 + 9, Decimal("1800.5"), 0, 0, Decimal(3600), Decimal(3600)),
            (1, 24 + 10, Decimal(900), Decimal(900), 0, 0, Decimal(1800)),
        ],
    )
    today = D0 + DAY
    hourly = figures(personas, today, today + DAY)
    account_until(personas.cluster, today + timedelta(hours=11, minutes=20))
    usage_days_refresh(cluster=personas.cluster)
    through = today + timedelta(hours=10)
    assert UsageDayCursor.objects.get(cluster=personas.cluster).open_through == through
    day_q, hour_q = usage_sources(cluster_ids=[personas.cluster.pk], start=today, end=today + DAY)
    cached = UsageDay.objects.filter(day_q)
    assert sorted(cached.values_list("project_id", "budgeted_gpu_seconds")) == [
        (personas.projects[0].pk, Decimal("5400.5"))  # 03:00 and 09:00
    ]
    later = UsageHour.objects.filter(hour_q)
    assert list(later.values_list("hour", flat=True)) == [today + timedelta(hours=10)]
    assert figures(personas, today, today + DAY) == hourly


def test_a_read_that_began_before_a_refresh_still_finds_its_rows(personas):
    """The rows a refresh replaces stay one refresh longer: a reader holding the filters it
    built before takes the same figures after the open day was cached further."""
    write_hours(
        personas,
        [(0, 24 + h, Decimal(100 + h), 0, 0, Decimal(3600), Decimal(3600)) for h in range(14)],
    )
    today = D0 + DAY
    account_until(personas.cluster, today + timedelta(hours=6, minutes=5))
    usage_days_refresh(cluster=personas.cluster)
    day_q, hour_q = usage_sources(cluster_ids=[personas.cluster.pk], start=today, end=today + DAY)

    def total(day_q, hour_q) -> Decimal:
        days = UsageDay.objects.filter(day_q).values_list("budgeted_gpu_seconds", flat=True)
        hours = UsageHour.objects.filter(hour_q).values_list("budgeted_gpu_seconds", flat=True)
        return sum(days, Decimal(0)) + sum(hours, Decimal(0))

    expected = sum((Decimal(100 + h) for h in range(14)), Decimal(0))
    assert total(day_q, hour_q) == expected
    account_until(personas.cluster, today + timedelta(hours=9, minutes=5))
    usage_days_refresh(cluster=personas.cluster)  # the open day now cached up to 08:00
    assert total(day_q, hour_q) == expected  # the reader's 05:00 rows are still there
    account_until(personas.cluster, today + timedelta(hours=12, minutes=5))
    usage_days_refresh(cluster=personas.cluster)
    throughs = set(UsageDay.objects.filter(through__isnull=False).values_list("through", flat=True))
    assert throughs == {today + timedelta(hours=8), today + timedelta(hours=11)}
    fresh = usage_sources(cluster_ids=[personas.cluster.pk], start=today, end=today + DAY)
    assert total(*fresh) == expected


def test_nothing_is_written_again_until_accounting_passes_another_hour(personas):
    write_hours(personas, [(0, 24 + 2, Decimal(3600), 0, 0, Decimal(3600), Decimal(3600))])
    today = D0 + DAY
    account_until(personas.cluster, today + timedelta(hours=5, minutes=1))
    usage_days_refresh(cluster=personas.cluster)
    rows = list(UsageDay.objects.values_list("id", flat=True))
    account_until(personas.cluster, today + timedelta(hours=5, minutes=59))
    assert usage_days_refresh(cluster=personas.cluster) == 0
    assert list(UsageDay.objects.values_list("id", flat=True)) == rows


def test_a_late_write_into_the_open_day_drops_its_cached_hours(personas):
    write_hours(personas, [(0, 24 + 2, Decimal(3600), 0, 0, Decimal(3600), Decimal(3600))])
    today = D0 + DAY
    account_until(personas.cluster, today + timedelta(hours=8))
    usage_days_refresh(cluster=personas.cluster)
    assert UsageDay.objects.filter(through__isnull=False).exists()
    # An external job's usage imported late, at 04:00 today (before the cached hours' end).
    write_hours(personas, [(1, 24 + 4, Decimal(7200), 0, 0, 0, Decimal(7200))])
    assert usage_days_reopen(cluster_id=personas.cluster.pk, since=today.date()) == 1
    cursor = UsageDayCursor.objects.get(cluster=personas.cluster)
    assert (cursor.until, cursor.open_through) == (today.date(), None)
    assert not UsageDay.objects.filter(day=today.date()).exists()
    tree, _days = figures(personas, today, today + DAY)
    charged = {key: total for key, total, *_ in tree}
    assert charged[("project", personas.projects[1].pk)] == Decimal(7200)
    usage_days_refresh(cluster=personas.cluster)  # cached again, with the late hour
    assert figures(personas, today, today + DAY)[0] == tree
