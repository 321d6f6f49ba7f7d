"""The demo's past has GPU utilization: one row per run, node and hour of its ledger, by the
simulated executor's rule, and the live executor and the idle rule carry on from it."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.db.models.functions import TruncHour

from scheduler.executors.simulated import simulated_executor_step
from scheduler.executors.utilization_model import Behaviour, utilization_profile
from scheduler.models import Run, UsageRecord, UtilizationHour
from scheduler.selectors.utilization import DEFAULT_FOR_MINUTES
from scheduler.services.utilization import idle_rule_apply
from tests.scheduler.test_demo_history import NOW, demo  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


def profile_of(run: Run):
    workload = run.workload
    return utilization_profile(
        workload_id=workload.pk,
        gpus=workload.gpus,
        declared_seconds=float(workload.declared_duration_seconds),
    )


def test_allocated_is_the_ledger_of_each_run_and_hour(demo):  # noqa: F811
    cluster, report = demo
    assert report.utilization_rows == UtilizationHour.objects.filter(cluster=cluster).count() > 0
    ledger = {
        (run_id, hour): total
        for run_id, hour, total in UsageRecord.objects.filter(cluster=cluster)
        .annotate(hour=TruncHour("interval_start", tzinfo=UTC))
        .values("run_id", "hour")
        .annotate(total=Sum("gpu_seconds"))
        .values_list("run_id", "hour", "total")
    }
    allocated: dict[tuple, Decimal] = defaultdict(Decimal)
    for row in UtilizationHour.objects.filter(cluster=cluster):
        assert 0 <= row.busy_gpu_seconds <= row.allocated_gpu_seconds
        assert row.covered_from < row.reported_until <= NOW
        allocated[(row.run_id, row.hour)] += row.allocated_gpu_seconds
    assert allocated == ledger


def test_busy_follows_the_rule(demo):  # noqa: F811
    cluster, _ = demo
    rows = UtilizationHour.objects.filter(cluster=cluster).select_related("run__workload")
    for row in rows.order_by("pk")[:2000]:
        run = row.run
        start = (row.covered_from - run.started_at).total_seconds()
        end = (row.reported_until - run.started_at).total_seconds()
        expected = row.allocated_gpu_seconds * Decimal(repr(profile_of(run).mean(start, end)))
        # Rounded down to the microsecond, nothing more.
        assert expected - Decimal("0.000001") <= row.busy_gpu_seconds <= expected


def test_the_idle_rule_and_the_live_executor_carry_on_from_it(demo):  # noqa: F811
    cluster, _ = demo
    counts = idle_rule_apply(cluster=cluster, now=NOW)
    open_runs = list(Run.objects.filter(cluster=cluster, ended_at=None).select_related("workload"))
    marked = {run.pk for run in open_runs if run.idle_since is not None}
    assert counts["marked"] == len(marked)
    # Which runs the rule makes idle depends on the workloads' ids (the database's): every
    # run marked is one the rule makes idle, and each such run past its minimum runtime,
    # idle after its start-up for the window and the hour the hourly rows may add, is marked
    # at the rule's first minute.
    window = timedelta(minutes=DEFAULT_FOR_MINUTES + 60)
    for run in open_runs:
        profile = profile_of(run)
        if profile.behaviour != Behaviour.IDLE:
            assert run.pk not in marked
        elif (run.protected_until or run.started_at) <= NOW and (
            run.started_at + timedelta(seconds=profile.startup) + window <= NOW
        ):
            assert run.pk in marked
    # The simulated agents report on from where the history's rows end, without overlap.
    step = simulated_executor_step(cluster=cluster, now=NOW + timedelta(minutes=2))
    assert step.utilization_periods > 0
    for run in Run.objects.filter(cluster=cluster, ended_at=None):
        seconds = Decimal((NOW + timedelta(minutes=2) - run.started_at).total_seconds())
        total = UtilizationHour.objects.filter(run=run).aggregate(s=Sum("allocated_gpu_seconds"))
        assert total["s"] == run.gpus * seconds
