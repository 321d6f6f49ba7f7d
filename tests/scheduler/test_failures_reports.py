"""Executors repeat themselves: the same exit reported twice, the same order acknowledged twice.

After each: the workload ran once, the ledger equals Σ GPUs x run time, the loop carries on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.choices import ExitOutcome, OrderKind, OrderState, RunEndReason, WorkloadState
from scheduler.models import Order, Run, UsageRecord
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.executor_reports import order_acknowledge, run_report_exit
from scheduler.services.usage import usage_account
from scheduler.services.workloads import workload_submit
from tests.scheduler.conftest import ledger_total, runs_total, single_start_per_workload

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)

pytestmark = pytest.mark.django_db


def submit(world, project="budgeted", *, gpus=8, nodes=1, min_runtime=600, at=T0):
    return workload_submit(
        project=world.projects[project], cluster=world.cluster, name="job", gpus=gpus,
        nodes=nodes, min_runtime_seconds=min_runtime, launch_spec={"command": ["true"]}, now=at,
    )  # fmt: skip


def test_the_same_exit_reported_twice_ends_the_run_once(world):
    workload = submit(world)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    run = Run.objects.get(workload=workload)
    usage_account(cluster=world.cluster, now=T0 + 30 * SEC)

    first = run_report_exit(run=run, outcome=ExitOutcome.SUCCEEDED, exit_code=0, now=T0 + 60 * SEC)
    second = run_report_exit(run=run, outcome=ExitOutcome.FAILED, exit_code=1, now=T0 + 90 * SEC)

    assert first.ended_at == second.ended_at == T0 + 60 * SEC
    assert second.end_reason == RunEndReason.SUCCEEDED
    workload.refresh_from_db()
    assert (workload.state, workload.exit_code) == (WorkloadState.SUCCEEDED, 0)
    assert UsageRecord.objects.filter(run=run).count() == 2
    assert ledger_total(world.cluster) == runs_total(world.cluster) == 8 * 60
    # The loop carries on: the freed GPUs go to the next workload.
    nxt = submit(world, at=T0 + 100 * SEC)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 105 * SEC)
    assert Run.objects.filter(workload=nxt).count() == 1
    single_start_per_workload(world.cluster)


def test_the_same_stop_acknowledged_twice_ends_the_run_once(world):
    free = submit(world, "unbudgeted", gpus=16, nodes=2, min_runtime=0)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    submit(world, gpus=8, at=T0 + SEC)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 10 * SEC)
    free_run = Run.objects.get(workload=free)
    stop1, stop2 = Order.objects.filter(run=free_run, kind=OrderKind.STOP).order_by("node__name")

    order_acknowledge(order=stop1, now=T0 + 20 * SEC)
    order_acknowledge(order=stop1, now=T0 + 21 * SEC)  # retried: no effect
    order_acknowledge(order=stop2, now=T0 + 30 * SEC)
    again = order_acknowledge(order=stop2, now=T0 + 40 * SEC)

    assert again.state == OrderState.ACKNOWLEDGED and again.acknowledged_at == T0 + 30 * SEC
    free_run.refresh_from_db()
    assert free_run.ended_at == T0 + 30 * SEC
    free.refresh_from_db()
    assert free.state == WorkloadState.PENDING
    # The requeued workload starts again once, in a later cycle, with a new attempt.
    for run in Run.objects.filter(ended_at__isnull=True):
        run_report_exit(run=run, outcome=ExitOutcome.SUCCEEDED, now=T0 + 50 * SEC)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 55 * SEC)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + 56 * SEC)
    assert [r.attempt for r in Run.objects.filter(workload=free).order_by("attempt")] == [1, 2]
    usage_account(cluster=world.cluster, now=T0 + 60 * SEC)
    assert ledger_total(world.cluster) == runs_total(world.cluster, now=T0 + 60 * SEC)
    single_start_per_workload(world.cluster)


def test_a_start_acknowledged_twice_changes_nothing(world):
    workload = submit(world)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    (start,) = Order.objects.filter(run__workload=workload)

    order_acknowledge(order=start, now=T0 + SEC)
    order_acknowledge(order=start, now=T0 + 2 * SEC)

    start.refresh_from_db()
    assert (start.state, start.acknowledged_at) == (OrderState.ACKNOWLEDGED, T0 + SEC)
    assert Run.objects.get(workload=workload).ended_at is None
