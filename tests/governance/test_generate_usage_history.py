"""``manage.py generate_usage_history`` with its ledger: the ledger rows carry the rollup's
exact amounts (the reports' benchmarks read both)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Sum

from scheduler.models import UsageHour, UsageRecord

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the generator is PostgreSQL's")
def test_the_ledger_matches_the_hourly_rollup_charge_by_charge():
    call_command(
        "generate_usage_history", projects=3, clusters=1, days=2, seed=7, end="2026-11-01",
        stdout=open("/dev/null", "w"),  # noqa: SIM115
    )  # fmt: skip
    hours = UsageHour.objects.aggregate(
        budgeted=Sum("budgeted_gpu_seconds"), burst=Sum("burst_gpu_seconds"),
        free=Sum("free_gpu_seconds"),
    )  # fmt: skip
    assert hours["budgeted"] > 0
    ledger = dict(UsageRecord.objects.values_list("charge").annotate(total=Sum("gpu_seconds")))
    assert ledger == {charge: hours[charge] for charge in ("budgeted", "burst", "free")}
    assert not UsageRecord.objects.exclude(source="", external_id="").exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the generator is PostgreSQL's")
def test_until_now_ends_at_the_current_hour_with_today_in_the_daily_cache():
    from datetime import UTC, datetime, timedelta

    from django.core.management.base import CommandError

    from governance.models import UsageDayCursor
    from scheduler.models import AccountingCursor

    before = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    call_command(
        "generate_usage_history", projects=2, clusters=1, days=2, seed=8, until_now=True,
        no_ledger=True, stdout=open("/dev/null", "w"),  # noqa: SIM115
    )  # fmt: skip
    after = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    last = UsageHour.objects.order_by("-hour").values_list("hour", flat=True).first()
    assert before - timedelta(hours=1) <= last <= after - timedelta(hours=1)
    accounted = AccountingCursor.objects.get().accounted_until
    assert accounted == last + timedelta(hours=1)
    cursor = UsageDayCursor.objects.get()
    final = accounted - timedelta(hours=1)
    assert cursor.until == final.date()
    with pytest.raises(CommandError, match="not both"):
        call_command(
            "generate_usage_history", projects=2, clusters=1, days=2, seed=9, until_now=True,
            end="2026-11-01",
        )  # fmt: skip


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the generator is PostgreSQL's")
def test_the_summary_line_names_the_days_asked_for():
    """Three days ending 2026-11-01 on two clusters: the last line says 3 days, whatever the
    daily cache of the last cluster rolled (it used to print that cluster's count)."""
    import io

    out = io.StringIO()
    call_command(
        "generate_usage_history", projects=2, clusters=2, days=3, seed=10, end="2026-11-01",
        no_ledger=True, stdout=out,
    )  # fmt: skip
    summary = out.getvalue().strip().splitlines()[-1]
    assert "2 projects on 2 clusters, 3 days from 2026-10-29 to 2026-11-01" in summary
