"""The finance usage report: figures, cost at effective-dated rates, levels, periods.

``october`` (a fixture other report tests import) writes this ledger on the personas' tree,
plus a second cluster b200 (amounts in GPU-seconds)::

    Detection (CC-DET)  h100  2026-09-30 23:00  budgeted 3600                 (September)
                        h100  2026-10-05 10:00  budgeted 7200.5, burst 1800.25, free 3600
                        h100  2026-10-15 12:00  budgeted 3600        (temporary rate 3.00)
    Segmentation        h100  2026-10-31 23:00  budgeted 0.000001
    Translation         b200  2026-10-20 00:00  budgeted 3600000 (1,000 GPU-hours)
                        h100  2026-11-01 00:00  budgeted 3600                 (November)

Rates: h100 2.00 USD from 2026-01-01, 3.00 USD on 2026-10-15 only; b200 4.50 USD.
October by hand: Detection h100 budgeted 10800.5, burst 1800.25, free 3600, total
16200.75 GPU-s, cost (12600.75 x 2 + 3600 x 3) / 3600 = 10.0004… → 10.00;
Segmentation 0.000001 GPU-s, cost 0.00; Translation b200 3600000 GPU-s, cost 4,500.00.
Totals: budgeted 3610800.500001, burst 1800.25, free 3600, total 3616200.750001, cost 4,510.00.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Sum

from governance.models import CostRate
from governance.selectors.reports import usage_report
from governance.selectors.visibility import user_visibility
from scheduler.models import UsageRecord
from scheduler.services.usage import usage_rebuild
from tests.factories import ClusterFactory, OrganizationFactory, ProgramFactory
from tests.governance.test_selectors_usage import write_usage

pytestmark = pytest.mark.django_db

D = Decimal
OCTOBER = (date(2026, 10, 1), date(2026, 10, 31))


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture(name="october")
def october_fixture(personas):
    """The module docstring's ledger, rolled up, with its rates."""
    p = personas
    p.project_a1.cost_centre = "CC-DET"
    p.project_a1.save()
    b200 = ClusterFactory(organization=p.organization, name="b200", slug="b200", gpu_type="b200")
    p.b200 = b200
    h100 = p.cluster
    write_usage(p.project_a1, h100, at(2026, 9, 30, 23), budgeted=D(3600))
    write_usage(
        p.project_a1, h100, at(2026, 10, 5, 10), budgeted=D("7200.5"), burst=D("1800.25"), free=3600
    )
    write_usage(p.project_a1, h100, at(2026, 10, 15, 12), budgeted=D(3600))
    write_usage(p.project_a2, h100, at(2026, 10, 31, 23), budgeted=D("0.000001"))
    write_usage(p.project_b1, b200, at(2026, 10, 20, 0), budgeted=D(3600000))
    write_usage(p.project_b1, h100, at(2026, 11, 1, 0), budgeted=D(3600))
    usage_rebuild(cluster=h100)
    usage_rebuild(cluster=b200)
    CostRate.objects.create(gpu_type="h100", rate_per_gpu_hour=D("2.00"), valid_from=at(2026, 1, 1))
    CostRate.objects.create(
        gpu_type="h100",
        rate_per_gpu_hour=D("3.00"),
        valid_from=at(2026, 10, 15),
        valid_to=at(2026, 10, 16),
    )
    CostRate.objects.create(gpu_type="b200", rate_per_gpu_hour=D("4.50"), valid_from=at(2026, 1, 1))
    return p


def ledger_total(start: datetime, end: datetime, **filters) -> Decimal:
    """Σ gpu_seconds of the ledger over ``[start, end)`` — the reference every export meets."""
    return UsageRecord.objects.filter(
        interval_start__gte=start, interval_start__lt=end, **filters
    ).aggregate(total=Sum("gpu_seconds"))["total"]


def report_for(user, **kwargs):
    start, end = kwargs.pop("period", OCTOBER)
    return usage_report(visibility=user_visibility(user=user), start=start, end=end, **kwargs)


def test_october_by_project_worked_by_hand(october):
    report = report_for(october.finance)
    lines = [
        (r.project, r.cost_centre, r.cluster, r.budgeted_gpu_seconds, r.burst_gpu_seconds,
         r.free_gpu_seconds, r.total_gpu_seconds, r.cost)
        for r in report.rows
    ]  # fmt: skip
    assert lines == [
        ("Translation", october.project_b1.cost_centre, "b200", D(3600000), 0, 0, D(3600000),
         D("4500.00")),
        ("Detection", "CC-DET", "h100", D("10800.5"), D("1800.25"), D(3600), D("16200.75"),
         D("10.00")),
        ("Segmentation", october.project_a2.cost_centre, "h100", D("0.000001"), 0, 0,
         D("0.000001"), D("0.00")),
    ]  # fmt: skip
    assert all(r.period_start == date(2026, 10, 1) for r in report.rows)
    assert all(r.period_end == date(2026, 10, 31) for r in report.rows)
    totals = report.totals
    assert totals.budgeted_gpu_seconds == D("3610800.500001")
    assert totals.burst_gpu_seconds == D("1800.25")
    assert totals.free_gpu_seconds == D(3600)
    assert totals.total_gpu_seconds == D("3616200.750001")
    assert totals.cost == D("4510.00")
    assert report.currency == "USD"
    assert report.title == "GPU usage 2026-10"
    assert report.warnings == []


def test_totals_equal_the_ledger_at_every_level(october):
    ledger = ledger_total(at(2026, 10, 1), at(2026, 11, 1))
    assert ledger == D("3616200.750001")
    for level in ("project", "program", "organization"):
        report = report_for(october.finance, level=level)
        assert report.totals.total_gpu_seconds == ledger, level
        assert sum(r.total_gpu_seconds for r in report.rows) == ledger, level
        assert sum(r.cost for r in report.rows) == D("4510.00"), level


def test_program_and_organization_rows_sum_their_projects_exactly(october):
    projects = report_for(october.finance, level="project").rows
    programs = report_for(october.finance, level="program").rows
    assert [(r.program, r.cluster, r.budgeted_gpu_seconds, r.cost) for r in programs] == [
        ("Language", "b200", D(3600000), D("4500.00")),
        ("Vision", "h100", D("10800.500001"), D("10.00")),
    ]
    for program_row in programs:
        children = [
            r
            for r in projects
            if r.program == program_row.program and r.cluster_id == program_row.cluster_id
        ]
        for name in ("budgeted_gpu_seconds", "burst_gpu_seconds", "free_gpu_seconds"):
            assert getattr(program_row, name) == sum(getattr(c, name) for c in children)
        assert program_row.cost == sum(c.cost for c in children)
    orgs = report_for(october.finance, level="organization").rows
    assert [(r.organization, r.cluster, r.total_gpu_seconds) for r in orgs] == [
        ("Acme Research", "b200", D(3600000)),
        ("Acme Research", "h100", D("16200.750001")),
    ]


def test_a_range_splits_into_months_clipped_to_the_period(october):
    report = report_for(october.finance, period=(date(2026, 9, 30), date(2026, 10, 5)))
    assert [(r.period_start, r.period_end, r.total_gpu_seconds, r.cost) for r in report.rows] == [
        (date(2026, 9, 30), date(2026, 9, 30), D(3600), D("2.00")),
        (date(2026, 10, 1), date(2026, 10, 5), D("12600.75"), D("7.00")),
    ]
    assert report.title == "GPU usage 2026-09-30 to 2026-10-05"
    assert report.totals.total_gpu_seconds == ledger_total(at(2026, 9, 30), at(2026, 10, 6))


def test_one_cluster_and_one_program(october):
    report = report_for(october.finance, cluster=october.b200)
    assert [r.project for r in report.rows] == ["Translation"]
    report = report_for(october.finance, program=october.program_a)
    assert [r.project for r in report.rows] == ["Detection", "Segmentation"]
    assert report.totals.total_gpu_seconds == ledger_total(
        at(2026, 10, 1), at(2026, 11, 1), project__program=october.program_a
    )


def test_usage_without_a_rate_is_reported_and_not_costed(october):
    CostRate.objects.filter(gpu_type="b200").delete()
    report = report_for(october.finance)
    translation = next(r for r in report.rows if r.project == "Translation")
    assert translation.cost is None
    assert translation.uncosted_gpu_seconds == D(3600000)
    assert report.totals.cost == D("10.00")
    assert report.warnings == ["1,000.0 GPU-hours fall in hours with no cost rate: not costed."]


def test_rates_in_several_currencies_show_no_cost(october):
    CostRate.objects.filter(gpu_type="b200").update(currency="EUR")
    report = report_for(october.finance)
    assert report.currency == "mixed"
    assert report.totals.cost is None
    assert report.totals.total_gpu_seconds == D("3616200.750001")


@pytest.mark.parametrize("persona", ["program_manager", "pi", "researcher", "outsider"])
def test_only_finance_and_org_admins_read_reports(october, persona):
    with pytest.raises(PermissionDenied):
        report_for(getattr(october, persona))


def test_org_admin_reads_the_same_report_as_finance(october):
    assert report_for(october.org_admin).totals.total_gpu_seconds == D("3616200.750001")


def test_a_program_of_another_organization_is_refused(october):
    other = ProgramFactory(organization=OrganizationFactory())
    with pytest.raises(PermissionDenied):
        report_for(october.finance, program=other)


@pytest.mark.parametrize(
    ("period", "level", "field"),
    [
        ((date(2026, 10, 31), date(2026, 10, 1)), "project", "end"),
        ((date(2020, 1, 1), date(2026, 10, 1)), "project", "end"),
        (OCTOBER, "team", "level"),
    ],
)
def test_bad_input_names_the_field(october, period, level, field):
    with pytest.raises(ValidationError) as refused:
        report_for(october.finance, period=period, level=level)
    assert field in refused.value.message_dict


def test_a_rate_changing_mid_day_applies_from_the_hour_it_covers_cached_or_not(october):
    """5.00 from 09:30 to 10:30 on 5 October covers the start of the 10:00 hour only.

    Detection's October cost: (12600.75 x 5 + 3600 x 3) / 3600 = 20.5010… → 20.50.
    """
    from governance.services.reports import usage_days_refresh
    from scheduler.models import AccountingCursor

    CostRate.objects.create(
        gpu_type="h100",
        rate_per_gpu_hour=D("5.00"),
        valid_from=at(2026, 10, 5, 9, 30),
        valid_to=at(2026, 10, 5, 10, 30),
    )
    hourly = report_for(october.finance)
    for cluster in (october.cluster, october.b200):
        AccountingCursor.objects.create(cluster=cluster, accounted_until=at(2026, 11, 20))
        assert usage_days_refresh(cluster=cluster) > 0
    cached = report_for(october.finance)
    for report in (hourly, cached):
        detection = next(r for r in report.rows if r.project == "Detection")
        assert detection.cost == D("20.50")
        assert report.totals.total_gpu_seconds == D("3616200.750001")
        assert report.totals.cost == D("4520.50")
    assert [vars(r) for r in cached.rows] == [vars(r) for r in hourly.rows]


def _accounted(october, until: datetime) -> None:
    from governance.services.reports import usage_days_refresh
    from scheduler.models import AccountingCursor

    for cluster in (october.cluster, october.b200):
        AccountingCursor.objects.update_or_create(
            cluster=cluster, defaults={"accounted_until": until}
        )
        usage_days_refresh(cluster=cluster)


def _lines(report):
    return [vars(row) for row in report.rows]


def test_a_finished_month_is_kept_until_its_usage_or_its_rates_change(october):
    _accounted(october, at(2026, 11, 20))
    first = report_for(october.finance)
    assert _lines(report_for(october.finance)) == _lines(first)  # the kept sums
    # A repair writes October again (the ledger rebuilt, as after a late import).
    write_usage(october.project_a2, october.cluster, at(2026, 10, 7, 3), budgeted=D(7200))
    usage_rebuild(cluster=october.cluster)
    _accounted(october, at(2026, 11, 20))
    segmentation = {r.project: r for r in report_for(october.finance).rows}["Segmentation"]
    assert segmentation.budgeted_gpu_seconds == D(7200) + D("0.000001")
    # A rate for October decided afterwards.
    CostRate.objects.create(
        gpu_type="b200", rate_per_gpu_hour=D("5.00"), valid_from=at(2026, 10, 1)
    )
    translation = {r.project: r for r in report_for(october.finance).rows}["Translation"]
    assert translation.cost == D("5000.00")  # 1,000 GPU-hours at 5.00


def test_a_month_accounting_may_still_write_into_is_read_every_time(october):
    from scheduler.models import UsageHour

    _accounted(october, at(2026, 10, 20))
    before = {r.project: r for r in report_for(october.finance).rows}
    # Accounting writes the hour it is in (not final yet): the next report shows it.
    UsageHour.objects.create(
        project=october.project_b2, cluster=october.cluster, hour=at(2026, 10, 19, 23),
        budgeted_gpu_seconds=D(1800), burst_gpu_seconds=0, free_gpu_seconds=0,
        entitled_gpu_seconds=D(3600), demand_gpu_seconds=D(1800),
    )  # fmt: skip
    after = {r.project: r for r in report_for(october.finance).rows}
    assert "Summaries" not in before or before["Summaries"].budgeted_gpu_seconds == 0
    assert after[october.project_b2.name].budgeted_gpu_seconds == D(1800)
