"""The simulated executor's GPU telemetry, through the agent API's own service, seen by the
idle rule: time is driven by passing ``now``, never by sleeping."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.utils import timezone

from governance.choices import NotificationKind
from governance.models import Notification
from scheduler.executors.simulated import simulated_executor_step, simulated_nodes_ensure
from scheduler.executors.utilization_model import IDLE_LEVEL, Behaviour, utilization_profile
from scheduler.models import Run, UtilizationHour, Workload
from scheduler.selectors.utilization import DEFAULT_FOR_MINUTES
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.utilization import idle_rule_apply
from scheduler.services.workloads import workload_cancel, workload_submit
from tests.personas import build_personas

pytestmark = pytest.mark.django_db

SPEEDUP = 4
MIN_RUNTIME = 600  # wall seconds


@pytest.fixture
def personas(settings):
    """The personas' 4 x 8 cluster, simulated at 4x, without the demo replay."""
    settings.SIMULATED_EXECUTOR_CLUSTERS = ["acme/h100"]
    settings.SIMULATED_EXECUTOR_SPEEDUP = SPEEDUP
    settings.DEMO_REPLAY_ENABLED = False
    return build_personas()


def profile_of(workload: Workload):
    return utilization_profile(
        workload_id=workload.pk,
        gpus=workload.gpus,
        declared_seconds=float(workload.declared_duration_seconds),
    )


def submit_one(personas, behaviour: Behaviour, *, gpus=2, hours=12) -> Workload:
    """A workload the rule gives ``behaviour``: ids come from the database, so submit until
    one has it (15 % of non-debug ids are idle) and cancel the others while they wait."""
    for _ in range(200):
        workload = workload_submit(
            project=personas.project_a1,
            cluster=personas.cluster,
            name=f"{behaviour} job",
            gpus=gpus,
            min_runtime_seconds=MIN_RUNTIME,
            declared_duration_seconds=hours * 3600,
            launch_spec={"command": ["python", "train.py"]},
            submitted_by=personas.researcher,
        )
        if profile_of(workload).behaviour == behaviour:
            return workload
        workload_cancel(workload=workload)
    raise AssertionError(f"no {behaviour} workload in 200 ids")


def idle_notices(personas) -> int:
    return Notification.objects.filter(
        recipient=personas.researcher, kind=NotificationKind.WORKLOAD_IDLE
    ).count()


def test_an_idle_workload_is_marked_once_past_its_minimum_and_the_window(personas):
    t0 = timezone.now()
    simulated_nodes_ensure(cluster=personas.cluster, now=t0)
    idle = submit_one(personas, Behaviour.IDLE)
    busy = submit_one(personas, Behaviour.BUSY)
    scheduling_cycle_run(cluster_id=personas.cluster.pk, now=t0)
    runs = {w.pk: Run.objects.get(workload=w) for w in (idle, busy)}

    marked_at = None
    # Two hours of wall time, a step every 30 s and the idle rule every minute (its beat).
    for k in range(1, 241):
        now = t0 + timedelta(seconds=30 * k)
        simulated_executor_step(cluster=personas.cluster, now=now)
        if k % 2 == 0:
            idle_rule_apply(cluster=personas.cluster, now=now)
            if marked_at is None and Run.objects.get(pk=runs[idle.pk].pk).idle_since:
                marked_at = now
        assert Run.objects.get(pk=runs[busy.pk].pk).idle_since is None, now - t0

    run = runs[idle.pk]
    assert marked_at is not None
    # Never inside the minimum runtime, nor before telemetry covered a whole window.
    assert marked_at >= run.protected_until
    assert marked_at >= run.started_at + timedelta(minutes=DEFAULT_FOR_MINUTES)
    # Its start-up (at most 20 simulated minutes: 5 wall minutes at 4x) then the window, and
    # at most an hour more while the hourly row of the start-up still weighs in the window.
    assert marked_at <= run.started_at + timedelta(minutes=5 + DEFAULT_FOR_MINUTES + 60)
    assert idle_notices(personas) == 1
    # Both runs are still running: 12 simulated hours are 3 wall hours at 4x.
    assert Run.objects.filter(pk__in=[r.pk for r in runs.values()], ended_at=None).count() == 2


def test_reports_cover_each_run_exactly_and_stay_within_the_rule(personas):
    t0 = timezone.now()
    simulated_nodes_ensure(cluster=personas.cluster, now=t0)
    idle = submit_one(personas, Behaviour.IDLE, gpus=4, hours=1)
    busy = submit_one(personas, Behaviour.BUSY, gpus=4, hours=1)
    scheduling_cycle_run(cluster_id=personas.cluster.pk, now=t0)
    # One simulated hour of work is 15 wall minutes at 4x: step past the end of both.
    for k in range(1, 41):
        simulated_executor_step(cluster=personas.cluster, now=t0 + timedelta(seconds=30 * k))
    for workload in (idle, busy):
        run = Run.objects.get(workload=workload)
        assert run.ended_at is not None
        rows = UtilizationHour.objects.filter(run=run)
        totals = rows.aggregate(a=Sum("allocated_gpu_seconds"), b=Sum("busy_gpu_seconds"))
        # The final period was reported as the run ended: allocated = GPUs x its run time.
        seconds = Decimal((run.ended_at - run.started_at) // timedelta(microseconds=1)) / 10**6
        assert totals["a"] == run.gpus * seconds
        share = totals["b"] / totals["a"]
        expected = profile_of(workload).mean(0, float(seconds) * SPEEDUP)
        # Each period is rounded down to the microsecond; nothing more may differ.
        assert abs(float(share) - expected) < 1e-6
    idle_run = Run.objects.get(workload=idle)
    # Past its start-up the idle one is at most IDLE_LEVEL busy.
    assert profile_of(idle).mean(1200, 3600) <= IDLE_LEVEL[1]
    assert idle_run.idle_since is None  # the rule never ran here


def test_a_restarted_step_carries_on_from_the_stored_rows(personas):
    """Where a run's reports stopped is read from its rows: a second step at the same time,
    or an overlapping one, stores nothing twice."""
    t0 = timezone.now()
    simulated_nodes_ensure(cluster=personas.cluster, now=t0)
    workload = submit_one(personas, Behaviour.BUSY, gpus=8)
    scheduling_cycle_run(cluster_id=personas.cluster.pk, now=t0)
    run = Run.objects.get(workload=workload)
    later = t0 + timedelta(minutes=3)
    first = simulated_executor_step(cluster=personas.cluster, now=later)
    again = simulated_executor_step(cluster=personas.cluster, now=later)
    assert (first.utilization_periods, again.utilization_periods) == (1, 0)
    allocated = UtilizationHour.objects.filter(run=run).aggregate(s=Sum("allocated_gpu_seconds"))
    assert allocated["s"] == 8 * Decimal((later - run.started_at).total_seconds())
