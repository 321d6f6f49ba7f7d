"""The usage ledger: exact GPU-seconds, budgeted/burst/free, hourly rollup, rebuild."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command

from governance.models import Allocation
from scheduler.choices import Charge, RunEndReason
from scheduler.models import EntitlementRecord, Run, UsageHour, UsageRecord
from scheduler.selectors.usage import usage_window_by_project
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.nodes import node_mark_down
from scheduler.services.runs import run_end
from scheduler.services.usage import usage_account, usage_rebuild
from scheduler.services.workloads import workload_submit
from tests.scheduler.conftest import build_world, ledger_total, runs_total

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)

pytestmark = pytest.mark.django_db


def start(world, project, *, gpus, nodes=1, min_runtime=600, at=T0) -> Run:
    workload = workload_submit(
        project=world.projects[project], cluster=world.cluster, name=f"{project}-{gpus}",
        gpus=gpus, nodes=nodes, min_runtime_seconds=min_runtime,
        launch_spec={"command": ["true"]}, now=at,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=world.cluster.id, now=at)
    return Run.objects.get(workload=workload)


def rows(run):
    return [
        (r.interval_start, r.interval_end, r.charge, r.gpu_seconds)
        for r in UsageRecord.objects.filter(run=run).order_by("interval_start")
    ]


def test_intervals_are_closed_each_pass_and_at_the_end_of_the_run(world):
    run = start(world, "budgeted", gpus=8)

    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)
    usage_account(cluster=world.cluster, now=T0 + 20 * MIN)
    run_end(run=run, reason=RunEndReason.SUCCEEDED, now=T0 + 30 * MIN)

    assert rows(run) == [
        (T0, T0 + 10 * MIN, Charge.BUDGETED, Decimal("4800")),
        (T0 + 10 * MIN, T0 + 20 * MIN, Charge.BUDGETED, Decimal("4800")),
        (T0 + 20 * MIN, T0 + 30 * MIN, Charge.BUDGETED, Decimal("4800")),
    ]
    assert ledger_total(world.cluster) == runs_total(world.cluster) == Decimal("14400")


def test_accounting_twice_at_the_same_instant_charges_once(world):
    run = start(world, "budgeted", gpus=8)

    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)
    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)

    assert len(rows(run)) == 1
    assert ledger_total(world.cluster) == Decimal("4800")


def test_interval_crossing_an_hour_is_split_at_the_hour(world):
    run = start(world, "budgeted", gpus=2, at=T0 + 50 * MIN)

    usage_account(cluster=world.cluster, now=T0 + 70 * MIN)

    assert rows(run) == [
        (T0 + 50 * MIN, T0 + 60 * MIN, Charge.BUDGETED, Decimal("1200")),
        (T0 + 60 * MIN, T0 + 70 * MIN, Charge.BUDGETED, Decimal("1200")),
    ]


def test_usage_above_the_hours_entitlement_is_burst_split_at_the_exact_instant(db):
    # 25 % of 16 healthy GPUs = 4 GPUs x 3600 s = 14,400 GPU-s budgeted per hour; a run of
    # 8 GPUs uses that up in 30 minutes, the rest of the hour is burst.
    world = build_world(shares={"quarter": "25"})
    run = start(world, "quarter", gpus=8)

    usage_account(cluster=world.cluster, now=T0 + 60 * MIN)

    assert rows(run) == [
        (T0, T0 + 30 * MIN, Charge.BUDGETED, Decimal("14400")),
        (T0 + 30 * MIN, T0 + 60 * MIN, Charge.BURST, Decimal("14400")),
    ]
    hour = UsageHour.objects.get(project=world.projects["quarter"], hour=T0)
    assert (hour.budgeted_gpu_seconds, hour.burst_gpu_seconds) == (14400, 14400)


def test_burst_cap_is_per_hour_and_shared_by_a_projects_runs(db):
    world = build_world(shares={"quarter": "25"})
    first = start(world, "quarter", gpus=4)
    second = start(world, "quarter", gpus=4)

    usage_account(cluster=world.cluster, now=T0 + 90 * MIN)

    hour_10 = UsageHour.objects.get(project=world.projects["quarter"], hour=T0)
    hour_11 = UsageHour.objects.get(project=world.projects["quarter"], hour=T0 + 60 * MIN)
    # 4 GPUs x 3600 = 14,400 budgeted in hour 10 and 8 x 3600 - 14,400 = 14,400 burst.
    # Hour 11 has run 30 minutes: 4 x 1800 = 7,200 of entitlement accrued, so of the
    # 8 x 1800 = 14,400 charged, 7,200 is burst (not all budgeted against the whole
    # hour's entitlement, which has not accrued yet).
    assert (hour_10.budgeted_gpu_seconds, hour_10.burst_gpu_seconds) == (14400, 14400)
    assert (hour_11.budgeted_gpu_seconds, hour_11.burst_gpu_seconds) == (7200, 7200)
    assert hour_11.entitled_gpu_seconds == 7200
    assert ledger_total(world.cluster) == runs_total(world.cluster, now=T0 + 90 * MIN)
    assert {r.run_id for r in UsageRecord.objects.all()} == {first.id, second.id}


def test_burst_in_a_partial_hour_is_measured_against_the_entitlement_of_the_same_seconds(db):
    # The first minutes of a fresh installation: 14 minutes into the hour, a project entitled
    # to 4 GPUs runs 8. Entitled 4 x 840 = 3,360 GPU-s; charged 8 x 840 = 6,720; burst is the
    # 3,360 above the entitlement of those minutes, not 0 against the whole hour's 14,400.
    world = build_world(shares={"quarter": "25"})
    start(world, "quarter", gpus=8)

    usage_account(cluster=world.cluster, now=T0 + 14 * MIN)

    hour = UsageHour.objects.get(project=world.projects["quarter"], hour=T0)
    assert hour.entitled_gpu_seconds == 3360
    assert (hour.budgeted_gpu_seconds, hour.burst_gpu_seconds) == (3360, 3360)


def test_each_pass_budgets_only_the_entitlement_accrued_by_then(db):
    # Passes every 10 minutes over an hour: after each, budgeted never exceeds entitled, and
    # a project running at twice its entitlement is half burst at every pass.
    world = build_world(shares={"quarter": "25"})
    start(world, "quarter", gpus=8)
    for minutes in range(10, 70, 10):
        usage_account(cluster=world.cluster, now=T0 + minutes * MIN)
        hour = UsageHour.objects.get(project=world.projects["quarter"], hour=T0)
        assert hour.entitled_gpu_seconds == 4 * 60 * minutes
        assert hour.budgeted_gpu_seconds == hour.entitled_gpu_seconds
        assert hour.burst_gpu_seconds == 8 * 60 * minutes - hour.entitled_gpu_seconds


def test_unbudgeted_usage_is_burst_and_free_lane_is_free(world):
    charged = start(world, "unbudgeted", gpus=4, min_runtime=600)
    free = start(world, "unbudgeted", gpus=2, min_runtime=0)

    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)

    assert rows(charged) == [(T0, T0 + 10 * MIN, Charge.BURST, Decimal("2400"))]
    assert rows(free) == [(T0, T0 + 10 * MIN, Charge.FREE, Decimal("1200"))]


def test_entitlement_and_demand_are_recorded_per_interval(db):
    world = build_world(shares={"quarter": "25", "none": None})
    start(world, "quarter", gpus=8)
    usage_account(cluster=world.cluster, now=T0)  # first pass starts the clock
    workload_submit(
        project=world.projects["none"], cluster=world.cluster, name="waiting", gpus=16, nodes=2,
        min_runtime_seconds=600, launch_spec={"command": ["true"]}, now=T0,
    )  # fmt: skip

    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)

    quarter = EntitlementRecord.objects.get(project=world.projects["quarter"])
    assert (quarter.entitled_gpu_seconds, quarter.demand_gpu_seconds) == (2400, 4800)
    none = EntitlementRecord.objects.get(project=world.projects["none"])
    assert (none.entitled_gpu_seconds, none.demand_gpu_seconds) == (0, 9600)
    hour = UsageHour.objects.get(project=world.projects["quarter"], hour=T0)
    assert (hour.entitled_gpu_seconds, hour.demand_gpu_seconds) == (2400, 4800)


def _rollup():
    return sorted(
        (
            r.project_id,
            r.hour,
            r.budgeted_gpu_seconds,
            r.burst_gpu_seconds,
            r.free_gpu_seconds,
            r.entitled_gpu_seconds,
            r.demand_gpu_seconds,
        )
        for r in UsageHour.objects.all()
    )


def test_rebuild_from_the_ledger_equals_the_incremental_rollup(db):
    world = build_world(shares={"quarter": "25", "half": "50", "none": None})
    usage_account(cluster=world.cluster, now=T0)
    a = start(world, "quarter", gpus=8, at=T0 + 5 * MIN)
    start(world, "half", gpus=4, at=T0 + 7 * MIN)
    start(world, "none", gpus=2, min_runtime=0, at=T0 + 8 * MIN)
    for minutes in (13, 29, 61, 95):
        usage_account(cluster=world.cluster, now=T0 + minutes * MIN)
    run_end(run=a, reason=RunEndReason.FAILED, now=T0 + 100 * MIN)
    usage_account(cluster=world.cluster, now=T0 + 130 * MIN)
    incremental = _rollup()
    assert len(incremental) >= 6

    call_command("rebuild_usage")

    assert _rollup() == incremental
    assert usage_rebuild(cluster=world.cluster) == len(incremental)
    assert ledger_total(world.cluster) == runs_total(world.cluster, now=T0 + 130 * MIN)


def test_windowed_usage_counts_charged_time_inside_the_window(db):
    world = build_world(shares={"quarter": "25", "none": None})
    start(world, "quarter", gpus=8)
    start(world, "none", gpus=2, min_runtime=0)
    usage_account(cluster=world.cluster, now=T0 + 60 * MIN)

    inside = usage_window_by_project(cluster=world.cluster, now=T0 + 61 * MIN, window_seconds=7200)
    later = usage_window_by_project(
        cluster=world.cluster, now=T0 + 5 * 60 * MIN, window_seconds=7200
    )

    # The free lane is not charged: it counts for nothing in fair share.
    assert inside == {world.projects["quarter"].id: 28800.0, world.projects["none"].id: 0.0}
    assert later == {}


def test_an_exit_stamped_before_the_last_accounting_pass_ends_the_run_there(world):
    run = start(world, "budgeted", gpus=8)
    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)

    run_end(run=run, reason=RunEndReason.SUCCEEDED, now=T0 + 5 * MIN)

    run.refresh_from_db()
    assert run.ended_at == T0 + 10 * MIN
    assert ledger_total(world.cluster) == runs_total(world.cluster) == 8 * 600


def test_one_pass_closes_runs_that_ended_at_different_moments_each_at_its_end(world):
    """Ends stored but not yet accounted (a replayed history stores them so) are each charged
    up to their own end in one pass, and each run remembers how far it was accounted."""
    a, b, c = (start(world, "budgeted", gpus=2) for _ in range(3))
    ended = {"end_reason": RunEndReason.SUCCEEDED}
    Run.objects.filter(pk=a.pk).update(ended_at=T0 + 3 * MIN, **ended)
    Run.objects.filter(pk=b.pk).update(ended_at=T0 + 7 * MIN, **ended)

    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)
    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)  # nothing is charged twice

    for run, end in ((a, T0 + 3 * MIN), (b, T0 + 7 * MIN), (c, T0 + 10 * MIN)):
        run.refresh_from_db()
        assert run.accounted_until == end
        assert rows(run) == [(T0, end, Charge.BUDGETED, Decimal(2 * (end - T0).seconds))]
    assert ledger_total(world.cluster) == runs_total(world.cluster, now=T0 + 10 * MIN)


def health_of_the_day(world, now):
    """The cluster health of ``now``'s UTC day, as an org admin of the world sees it."""
    from governance.choices import Role
    from governance.models import RoleAssignment
    from governance.selectors.health import cluster_health
    from governance.selectors.visibility import user_visibility

    RoleAssignment.objects.get_or_create(
        user=world.user, role=Role.ORG_ADMIN, organization=world.cluster.organization
    )
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    health = cluster_health(
        visibility=user_visibility(user=world.user),
        cluster=world.cluster,
        start=day,
        end=day + timedelta(days=1),
        now=now,
    )
    (today,) = [d for d in health.days if d.day == day]
    return today


def test_the_first_minutes_are_owed_as_they_are_used_and_health_measures_only_them(world):
    """A fresh cluster: work starts before the first accounting pass. Entitlement must cover
    those seconds too (or they count as used but never owed: occupancy over 100 %), and the
    health page must measure from when accounting began (not from midnight: availability
    0.2 % with every node healthy)."""
    start(world, "budgeted", gpus=16, nodes=2)  # the whole cluster, from T0
    usage_account(cluster=world.cluster, now=T0 + 70 * timedelta(seconds=1))
    usage_account(cluster=world.cluster, now=T0 + 2 * MIN)

    entitled = EntitlementRecord.objects.filter(cluster=world.cluster).order_by("interval_start")
    assert entitled.first().interval_start == T0
    today = health_of_the_day(world, T0 + 2 * MIN)
    assert today.availability == 1  # 16 GPUs healthy for the 120 s measured
    assert today.occupancy == 1  # all 16 ran for those 120 s
    assert today.capacity_gpu_seconds == Decimal(16 * 120)


def test_a_share_changed_earlier_in_the_hour_does_not_bend_availability(world):
    """The budgeted total drops from 100 % to 60 % at 10:05; accounting begins at 10:10.
    Healthy GPU-seconds are entitlement ÷ the budgeted total *of the accounted seconds*
    (60 %), not of the hour's start (100 %), or availability reads 60 % with every node up."""
    from governance.models import Allocation

    change, begin = T0 + 5 * MIN, T0 + 10 * MIN
    old = Allocation.objects.get(cluster=world.cluster, project=world.projects["budgeted"])
    old.valid_to = change
    old.save(update_fields=["valid_to"])
    Allocation.objects.create(
        cluster=world.cluster, project=world.projects["budgeted"], percent=Decimal(60),
        valid_from=change, set_by=world.user, reason="test",
    )  # fmt: skip
    start(world, "budgeted", gpus=8, at=begin)
    usage_account(cluster=world.cluster, now=begin + 20 * MIN)

    today = health_of_the_day(world, begin + 20 * MIN)
    assert today.capacity_gpu_seconds == Decimal(16 * 20 * 60)
    assert abs(today.availability - 1) < Decimal("1e-9")
    assert abs(today.occupancy - Decimal("0.5")) < Decimal("1e-9")  # 8 of 16 GPUs ran


def test_a_share_changed_between_two_passes_is_entitled_from_its_instant(world):
    """The share drops from 100 % to 40 % at 10:02, between passes at 10:01 and 10:10. The
    pass at 10:10 entitled all nine minutes at 40 % (the share it found), so the health page,
    which knows when the share changed, read availability 91 % with every node up."""
    usage_account(cluster=world.cluster, now=T0 + MIN)
    Allocation.objects.create(
        cluster=world.cluster, project=world.projects["budgeted"], percent=Decimal("40"),
        valid_from=T0 + 2 * MIN, set_by=world.user, reason="Cut.",
    )  # fmt: skip
    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)

    pieces = [
        (r.interval_start, r.interval_end, r.entitled_gpu_seconds)
        for r in EntitlementRecord.objects.filter(project=world.projects["budgeted"]).order_by(
            "interval_start"
        )
    ]
    assert pieces == [(T0 + MIN, T0 + 2 * MIN, 960), (T0 + 2 * MIN, T0 + 10 * MIN, 3072)]
    assert health_of_the_day(world, T0 + 10 * MIN).availability == 1


def test_a_node_leaving_service_between_passes_closes_the_interval_at_that_moment(world):
    """Both nodes run work from 10:00; node2 goes down at 10:05 (its run ends); the next
    pass is at 10:10. The pass used to owe all ten minutes at 8 healthy GPUs while 16 ran
    for five of them: occupancy 150 %."""
    start(world, "budgeted", gpus=8)
    start(world, "budgeted", gpus=8)
    usage_account(cluster=world.cluster, now=T0 + MIN)
    node_mark_down(node=world.nodes[1], now=T0 + 5 * MIN)
    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)

    healthy = [
        (r.interval_start, r.interval_end, r.healthy_gpus)
        for r in EntitlementRecord.objects.filter(project=world.projects["budgeted"]).order_by(
            "interval_start"
        )
    ]
    assert healthy == [
        (T0, T0 + MIN, 16), (T0 + MIN, T0 + 5 * MIN, 16), (T0 + 5 * MIN, T0 + 10 * MIN, 8)
    ]  # fmt: skip
    today = health_of_the_day(world, T0 + 10 * MIN)
    assert today.occupancy == 1  # everything healthy ran, the whole time
    assert today.availability == Decimal(16 * 300 + 8 * 300) / (16 * 600)


def test_free_lane_work_asks_for_nothing_owed(world):
    """Free-lane work (minimum runtime 0) is never charged, so it cannot be delivered: counted
    as demand it made owed time no team could ever get (a demo project read 0.6 % delivery)."""
    start(world, "budgeted", gpus=4, min_runtime=0)
    usage_account(cluster=world.cluster, now=T0 + 10 * MIN)

    hour = UsageHour.objects.get(project=world.projects["budgeted"], hour=T0)
    assert hour.free_gpu_seconds == 4 * 600
    assert hour.demand_gpu_seconds == 0
