"""The external usage service: idempotent by key, remainder-only, live charging rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from governance.models import Allocation
from scheduler.models import EntitlementRecord, UsageHour, UsageRecord
from scheduler.services.usage import usage_rebuild
from scheduler.services.usage_external import (
    DemandInterval,
    usage_external_entitlement,
    usage_external_record,
)
from tests.factories import ClusterFactory, ProgramFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 3, 2, 10, 30, tzinfo=UTC)


@pytest.fixture
def tree():
    """One cluster of 2 x 8 GPUs; program 100 %, project 25 % (4 GPUs), and one unbudgeted."""
    cluster = ClusterFactory(nodes=2, gpus_per_node=8)
    program = ProgramFactory(organization=cluster.organization)
    budgeted = ProjectFactory(program=program)
    unbudgeted = ProjectFactory(program=program)
    user = UserFactory()
    since = T0 - timedelta(days=1)
    Allocation.objects.create(
        cluster=cluster, program=program, percent=100, valid_from=since, set_by=user
    )
    Allocation.objects.create(
        cluster=cluster, project=budgeted, percent=25, valid_from=since, set_by=user
    )
    return cluster, budgeted, unbudgeted


def test_running_job_is_charged_to_now_then_only_the_remainder(tree):
    cluster, project, _ = tree
    args = {"cluster": cluster, "project": project, "source": "slurm", "external_id": "c:1"}
    first = usage_external_record(
        **args, start=T0, end=T0 + timedelta(minutes=10), gpus=2, now=T0 + timedelta(minutes=10)
    )
    assert (first.status, first.gpu_seconds) == ("created", Decimal(2 * 600))
    again = usage_external_record(
        **args, start=T0, end=T0 + timedelta(minutes=10), gpus=2, now=T0 + timedelta(minutes=11)
    )
    assert (again.status, again.gpu_seconds) == ("unchanged", 0)
    # Finished at 11:10: 40 more minutes, split at the 11:00 hour boundary.
    done = usage_external_record(
        **args, start=T0, end=T0 + timedelta(minutes=40), gpus=2, now=T0 + timedelta(hours=1)
    )
    assert (done.status, done.gpu_seconds, done.rows) == ("created", Decimal(2 * 1800), 2)
    total = sum(r.gpu_seconds for r in UsageRecord.objects.filter(external_id="c:1"))
    assert total == 2 * 2400
    hours = {h.hour: h.charged_gpu_seconds for h in UsageHour.objects.filter(project=project)}
    assert hours == {
        datetime(2026, 3, 2, 10, tzinfo=UTC): 2 * 1800,
        datetime(2026, 3, 2, 11, tzinfo=UTC): 2 * 600,
    }


def test_usage_above_the_hourly_cap_is_burst_and_no_share_is_all_burst(tree):
    cluster, project, unbudgeted = tree
    start = datetime(2026, 3, 2, 12, tzinfo=UTC)
    # Cap: 25 % of 16 GPUs = 4 GPUs for the hour; 8 GPUs for the hour → half budgeted.
    usage_external_record(
        cluster=cluster,
        project=project,
        source="slurm",
        external_id="c:2",
        start=start,
        end=start + timedelta(hours=1),
        gpus=8,
        now=start + timedelta(hours=1),
    )
    usage_external_record(
        cluster=cluster,
        project=unbudgeted,
        source="slurm",
        external_id="c:3",
        start=start,
        end=start + timedelta(minutes=6),
        gpus=1,
        now=start + timedelta(hours=1),
    )
    usage_external_record(
        cluster=cluster,
        project=project,
        source="slurm",
        external_id="c:4",
        start=start,
        end=start + timedelta(minutes=6),
        gpus=1,
        free=True,
        now=start + timedelta(hours=1),
    )
    by_charge = {
        (r.project_id, r.charge): r.gpu_seconds
        for r in UsageRecord.objects.all()
        if r.external_id in ("c:2", "c:3")
    }
    assert by_charge == {
        (project.id, "budgeted"): 4 * 3600,
        (project.id, "burst"): 4 * 3600,
        (unbudgeted.id, "burst"): 360,
    }
    row = UsageHour.objects.get(project=project, hour=start)
    assert (row.budgeted_gpu_seconds, row.burst_gpu_seconds, row.free_gpu_seconds) == (
        4 * 3600,
        4 * 3600,
        360,
    )


def test_rebuild_gives_the_same_rollup_with_external_rows(tree):
    cluster, project, _ = tree
    usage_external_record(
        cluster=cluster,
        project=project,
        source="slurm",
        external_id="c:5",
        start=T0,
        end=T0 + timedelta(hours=2),
        gpus=6,
        now=T0 + timedelta(hours=2),
    )
    before = sorted(
        UsageHour.objects.values_list("hour", "budgeted_gpu_seconds", "burst_gpu_seconds")
    )
    usage_rebuild(cluster=cluster)
    after = sorted(
        UsageHour.objects.values_list("hour", "budgeted_gpu_seconds", "burst_gpu_seconds")
    )
    assert before == after and len(before) == 3


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("source", {"source": ""}),
        ("external_id", {"external_id": ""}),
        ("gpus", {"gpus": -1}),
        ("end", {"end": T0 - timedelta(seconds=1)}),
        ("end", {"end": T0 + timedelta(days=9)}),
        ("start", {"start": T0.replace(tzinfo=None)}),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(tree, field, change):
    cluster, project, _ = tree
    args = {
        "cluster": cluster,
        "project": project,
        "source": "slurm",
        "external_id": "c:6",
        "start": T0,
        "end": T0 + timedelta(minutes=5),
        "gpus": 1,
        "now": T0 + timedelta(hours=1),
    } | change
    with pytest.raises(ValueError, match=rf"^{field}:"):
        usage_external_record(**args)
    assert not UsageRecord.objects.exists()


def test_project_of_another_organization_is_refused(tree):
    cluster, _, _ = tree
    stranger = ProjectFactory()
    with pytest.raises(ValueError, match=r"^project:"):
        usage_external_record(
            cluster=cluster,
            project=stranger,
            source="slurm",
            external_id="c:7",
            start=T0,
            end=T0 + timedelta(minutes=1),
            gpus=1,
            now=T0 + timedelta(hours=1),
        )


def test_entitlement_counts_demand_exactly_and_owed_is_capped(tree):
    cluster, project, unbudgeted = tree
    start = datetime(2026, 3, 2, 12, tzinfo=UTC)
    assert usage_external_entitlement(cluster=cluster, demand=[], until=start) == 0  # cursor
    demand = [
        DemandInterval(project.id, 2, start - timedelta(hours=3), start + timedelta(minutes=30)),
        DemandInterval(unbudgeted.id, 1, start + timedelta(minutes=15), None),
    ]
    usage_external_entitlement(cluster=cluster, demand=demand, until=start + timedelta(hours=1))
    rows = {r.project_id: r for r in EntitlementRecord.objects.all()}
    assert rows[project.id].entitled_gpu_seconds == 4 * 3600  # 25 % of 16 GPUs
    assert rows[project.id].demand_gpu_seconds == 2 * 1800
    assert rows[project.id].demand_gpus == 2
    assert rows[unbudgeted.id].entitled_gpu_seconds == 0
    assert rows[unbudgeted.id].demand_gpu_seconds == 45 * 60
    # Re-running up to the same instant writes nothing.
    assert (
        usage_external_entitlement(cluster=cluster, demand=demand, until=start + timedelta(hours=1))
        == 0
    )


def _read_as_reports_do(cluster, start, end) -> Decimal:
    """Charged GPU-seconds over [start, end): cached days from the daily cache, the rest
    from the hourly rows (``usage_sources``, the rule every report and dashboard reads by)."""
    from django.db.models import Sum

    from governance.models import UsageDay
    from governance.selectors.usage import usage_sources

    day_q, hour_q = usage_sources(cluster_ids=[cluster.pk], start=start, end=end)
    total = Decimal(0)
    for model, q in ((UsageDay, day_q), (UsageHour, hour_q)):
        if q is not None:
            sums = model.objects.filter(q).aggregate(
                b=Sum("budgeted_gpu_seconds"), u=Sum("burst_gpu_seconds")
            )
            total += (sums["b"] or 0) + (sums["u"] or 0)
    return total


ON_POSTGRESQL = pytest.mark.skipif(
    __import__("django.db").db.connection.vendor != "postgresql",
    reason="the daily cache is filled on PostgreSQL only",
)


def _jobs_then_cached(tree, *jobs):
    """Accounting 3 days past T0; each ``(id, hours, gpus)`` job charged from T0; then the
    closed days rolled into the daily cache. Returns the cluster, the arguments of a further
    import and T0's day with the next (the span the checks read)."""
    from governance.services.reports import usage_days_refresh
    from scheduler.models import AccountingCursor

    cluster, project, _ = tree
    now = T0 + timedelta(days=3)
    AccountingCursor.objects.create(cluster=cluster, accounted_until=now, accounted_from=T0)
    args = {"cluster": cluster, "project": project, "source": "slurm", "now": now}
    for external_id, hours, gpus in jobs:
        usage_external_record(
            **args, external_id=external_id, start=T0, end=T0 + timedelta(hours=hours), gpus=gpus
        )
    assert usage_days_refresh(cluster=cluster) >= 2  # T0's day and the next are cached
    day = datetime(T0.year, T0.month, T0.day, tzinfo=UTC)
    return cluster, args, (day, day + timedelta(days=2))


@ON_POSTGRESQL
def test_a_job_imported_after_its_days_were_cached_is_read_by_reports(tree):
    from governance.services.reports import usage_days_refresh

    cluster, args, span = _jobs_then_cached(tree, ("c:1", 2, 2))
    assert _read_as_reports_do(cluster, *span) == 2 * 7200

    # Imported late: a job that ran on T0's day, a day already in the cache.
    usage_external_record(
        **args, external_id="c:2", start=T0 + timedelta(hours=5),
        end=T0 + timedelta(hours=6), gpus=4,
    )  # fmt: skip
    assert _read_as_reports_do(cluster, *span) == 2 * 7200 + 4 * 3600
    # Rolled again, the cache holds it too.
    assert usage_days_refresh(cluster=cluster) >= 1
    assert _read_as_reports_do(cluster, *span) == 2 * 7200 + 4 * 3600


@ON_POSTGRESQL
def test_rebuilding_the_rollup_after_a_ledger_repair_drops_the_cached_days(tree):
    cluster, _, span = _jobs_then_cached(tree, ("c:1", 2, 2), ("c:2", 1, 1))
    assert _read_as_reports_do(cluster, *span) == 2 * 7200 + 3600

    # A repair: the second job was charged by mistake; its ledger rows are removed.
    UsageRecord.objects.filter(external_id="c:2").delete()
    usage_rebuild(cluster=cluster)
    assert _read_as_reports_do(cluster, *span) == 2 * 7200


@ON_POSTGRESQL
def test_the_fair_share_window_reads_the_same_from_the_daily_cache(tree):
    """The engine's window usage is the same whether whole days come from the daily cache
    or from the hourly rows; only the number of rows read differs."""
    from governance.models import UsageDayCursor
    from governance.services.reports import usage_days_refresh
    from scheduler.models import AccountingCursor
    from scheduler.selectors.usage import usage_window_by_project

    cluster, project, unbudgeted = tree
    now = T0 + timedelta(days=6, hours=3)
    AccountingCursor.objects.create(cluster=cluster, accounted_until=now, accounted_from=T0)
    for i in range(12):  # jobs every half day, of both projects, some across midnight
        usage_external_record(
            cluster=cluster, project=(project, unbudgeted)[i % 2], source="slurm",
            external_id=f"c:{i}", start=T0 + timedelta(hours=12 * i),
            end=T0 + timedelta(hours=12 * i + 3 + i % 5), gpus=1 + i % 3, now=now,
        )  # fmt: skip
    window = 5 * 86400 + 1800  # starts mid-day: partial days at both ends
    hourly_only = usage_window_by_project(cluster=cluster, now=now, window_seconds=window)
    assert usage_days_refresh(cluster=cluster) >= 5
    cached_until = UsageDayCursor.objects.get(cluster=cluster).until
    assert cached_until > (now - timedelta(seconds=window)).date()
    assert usage_window_by_project(cluster=cluster, now=now, window_seconds=window) == hourly_only
    assert set(hourly_only) == {project.id, unbudgeted.id}
