"""Celery tasks of the loop: one cycle at a time per cluster; a submit reaches a worker."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection
from django.test import override_settings

from governance.celery import app as celery_app
from scheduler.choices import OrderKind, WorkloadState
from scheduler.models import Order, Run, SchedulingCycle, Workload
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.cycle_queue import cycle_rerun_requested
from scheduler.services.locks import CYCLE_LOCK
from scheduler.services.workloads import workload_submit
from tests.conftest import wait_for
from tests.scheduler.conftest import build_world


def cycle_lock_held(cluster_id: int) -> bool:
    """Whether some session holds the cycle's advisory lock for the cluster (pg_locks)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND classid = %s AND objid = %s",
            [CYCLE_LOCK, cluster_id],
        )
        return cursor.fetchone()[0] > 0


def cycle_beside_a_holder(world) -> dict:
    """A cycle holds the lock (paused inside it, 2 s) while a second one tries, and skips.

    Returns both cycles' results (``holder``, ``skipper``) and whether a rerun was requested
    while the holder still held the lock (``requested``).
    """
    results = {}

    def hold() -> None:
        try:
            results["holder"] = scheduling_cycle_run(cluster_id=world.cluster.id)
        finally:
            connection.close()

    with override_settings(SCHEDULER_CYCLE_PAUSE_SECONDS=2):
        holder = threading.Thread(target=hold)
        holder.start()
        assert wait_for(lambda: cycle_lock_held(world.cluster.id), timeout=10)
        results["skipper"] = scheduling_cycle_run(cluster_id=world.cluster.id)
        results["requested"] = cycle_rerun_requested(cluster_id=world.cluster.id)
        holder.join(timeout=60)
    return results


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_cycles_one_runs_and_the_other_skips():
    world = build_world()
    # The submit enqueues a cycle. Send it to a queue no worker reads: a session-wide worker
    # started by an earlier test would otherwise run it and hold the lock first, making the
    # holder below skip instead of the second cycle.
    original_queue = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"unread-{uuid.uuid4().hex[:12]}"
    try:
        workload_submit(
            project=world.projects["budgeted"], cluster=world.cluster, name="job", gpus=8,
            min_runtime_seconds=600, launch_spec={"command": ["true"]},
        )  # fmt: skip
    finally:
        celery_app.conf.task_default_queue = original_queue
    results = cycle_beside_a_holder(world)
    assert results["skipper"] is None
    assert isinstance(results["holder"], SchedulingCycle)
    assert SchedulingCycle.objects.filter(cluster=world.cluster).count() == 1
    assert Run.objects.count() == 1


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_submit_leads_to_a_start_order_through_the_broker_and_a_worker(celery_worker):
    world = build_world()

    workload = workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name="job", gpus=8,
        min_runtime_seconds=600, launch_spec={"command": ["true"]},
    )  # fmt: skip

    order = wait_for(lambda: Order.objects.filter(run__workload=workload).first(), timeout=30)
    assert order is not None, "no start order: see var/celery-worker-*.log"
    assert order.kind == OrderKind.START
    assert Workload.objects.get(pk=workload.pk).state == WorkloadState.RUNNING
    assert SchedulingCycle.objects.filter(cluster=world.cluster).exists()


@pytest.mark.services
def test_a_test_without_the_worker_never_sends_it_tasks(_celery_worker_process):
    # The worker process lives for the whole session; once it has started, a test that did
    # not ask for it must still send to the queue nobody consumes in tests: a submit there
    # leaves its workload pending, whichever tests ran before (a home-page test once saw
    # its pending workload started by the worker another test had started).
    from governance.celery import app

    _proc, queue = _celery_worker_process
    assert app.conf.task_default_queue != queue
