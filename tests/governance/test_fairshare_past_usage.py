"""The fair-share history's past windows are kept in Django's cache only while every hour
they read is final, and a late write into those hours is never hidden by a kept figure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from governance.selectors.fairshare import _past_usage, _windowed_usage
from governance.services.reports import usage_days_refresh, usage_days_reopen
from scheduler.models import AccountingCursor, UsageHour

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the daily cache is made in PostgreSQL only"
    ),
]

D0 = datetime(2026, 10, 5, tzinfo=UTC)
WINDOW = timedelta(days=2)
INSTANTS = [D0 + timedelta(days=k) for k in (2, 3, 4)]  # three midnights


def hour_of(personas, project, at: datetime, budgeted: int) -> UsageHour:
    return UsageHour.objects.create(
        project=project, cluster=personas.cluster, hour=at, budgeted_gpu_seconds=budgeted,
        burst_gpu_seconds=0, free_gpu_seconds=0, entitled_gpu_seconds=3600,
        demand_gpu_seconds=3600,
    )  # fmt: skip


@pytest.fixture
def history(personas):
    for day in range(4):
        hour_of(personas, personas.project_a1, D0 + timedelta(days=day, hours=5), 3600)
        hour_of(personas, personas.project_b1, D0 + timedelta(days=day, hours=9), 1800 * day)
    AccountingCursor.objects.create(
        cluster=personas.cluster, accounted_until=D0 + timedelta(days=4, hours=3)
    )
    usage_days_refresh(cluster=personas.cluster)
    return personas


def test_kept_figures_are_the_read_ones_until_a_late_write(history):
    personas = history
    read = _windowed_usage(personas.cluster, INSTANTS, WINDOW)
    assert _past_usage(personas.cluster, INSTANTS, WINDOW) == read
    assert _past_usage(personas.cluster, INSTANTS, WINDOW) == read  # now from the cache
    assert read[1] == {personas.project_a1.pk: 7200.0, personas.project_b1.pk: 5400.0}
    # An external job's usage imported late into the second day, as the import does it.
    hour_of(personas, personas.project_a2, D0 + timedelta(days=1, hours=12), 900)
    usage_days_reopen(cluster_id=personas.cluster.pk, since=(D0 + timedelta(days=1)).date())
    usage_days_refresh(cluster=personas.cluster)  # rolled again: the cursor is where it was
    after = _past_usage(personas.cluster, INSTANTS, WINDOW)
    assert after[1][personas.project_a2.pk] == 900.0
    assert after == _windowed_usage(personas.cluster, INSTANTS, WINDOW)


def test_a_late_write_after_the_cached_days_is_not_hidden_either(history):
    personas = history
    _past_usage(personas.cluster, INSTANTS, WINDOW)
    # Into the last day, still read from the hourly rows (accounted to 03:00 the day after).
    hour_of(personas, personas.project_a2, D0 + timedelta(days=3, hours=20), 600)
    usage_days_reopen(cluster_id=personas.cluster.pk, since=(D0 + timedelta(days=3)).date())
    usage_days_refresh(cluster=personas.cluster)
    assert _past_usage(personas.cluster, INSTANTS, WINDOW)[2][personas.project_a2.pk] == 600.0


def test_hours_accounting_may_still_write_are_read_not_kept(history):
    personas = history
    later = [*INSTANTS, D0 + timedelta(days=5)]  # after the accounted hour
    _past_usage(personas.cluster, later, WINDOW)
    # Accounting writes the last day's hours as it goes: the next read shows them.
    hour_of(personas, personas.project_a2, D0 + timedelta(days=4, hours=6), 1200)
    assert _past_usage(personas.cluster, later, WINDOW)[3][personas.project_a2.pk] == 1200.0
