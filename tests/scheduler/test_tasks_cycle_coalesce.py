"""Enqueued cycles are coalesced: at most one queued per cluster, and no change is missed,
not even one whose cycle skipped because another cycle held the lock.

Real Redis and, where a cycle must run, the real Celery worker (``celery_worker``). The
queued messages are counted in the broker's own list for the queue (no timing assertions).
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from governance.celery import app as celery_app
from scheduler.choices import OrderKind
from scheduler.models import Order, SchedulingCycle
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.cycle_queue import (
    cycle_queued_key,
    cycle_rerun_key,
    cycle_rerun_request,
    cycle_rerun_requested,
)
from scheduler.services.workloads import workload_submit
from tests.conftest import wait_for
from tests.scheduler.conftest import build_world
from tests.scheduler.test_tasks_cycle import cycle_beside_a_holder

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

BURST = 16


def broker() -> redis.Redis:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


def queued_messages(queue: str) -> int:
    """Messages waiting in a Celery queue on the Redis broker (not yet taken by a worker)."""
    return broker().llen(queue)


@contextmanager
def unread_queue():
    """Send tasks to a fresh queue no worker reads, so every message sent stays countable."""
    original = celery_app.conf.task_default_queue
    queue = f"unread-{uuid.uuid4().hex[:12]}"
    celery_app.conf.task_default_queue = queue
    try:
        yield queue
    finally:
        celery_app.conf.task_default_queue = original
        broker().delete(queue)


@contextmanager
def eager_tasks():
    """Run tasks in process, as without a broker (the quick start)."""
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = eager


def submit(world, name: str, gpus: int = 1):
    return workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name=name, gpus=gpus,
        min_runtime_seconds=600, launch_spec={"command": ["true"]},
    )  # fmt: skip


def started(workloads) -> bool:
    ids = [w.pk for w in workloads]
    with_start = set(
        Order.objects.filter(kind=OrderKind.START, run__workload_id__in=ids).values_list(
            "run__workload_id", flat=True
        )
    )
    return with_start == set(ids)


def test_a_burst_of_submits_queues_one_cycle_per_cluster():
    world = build_world()
    with unread_queue() as queue:
        for i in range(BURST):
            submit(world, f"job-{i}")
        # 16 commits, each asking for a cycle: one message, the flag set until it starts.
        assert queued_messages(queue) == 1
        assert broker().exists(cycle_queued_key(world.cluster.id))
        broker().delete(cycle_queued_key(world.cluster.id))


def test_a_burst_with_a_worker_running_schedules_every_workload(celery_worker):
    world = build_world()
    queue = celery_app.conf.task_default_queue
    workloads = []
    for i in range(BURST):
        workloads.append(submit(world, f"job-{i}"))
        # Never more than one cycle waiting in the worker's queue (the solo worker holds at
        # most the one it is running, which has cleared the flag).
        assert queued_messages(queue) <= 1

    assert wait_for(lambda: started(workloads), timeout=60), "see var/celery-worker-*.log"
    cycles = SchedulingCycle.objects.filter(cluster=world.cluster).count()
    assert 1 <= cycles <= BURST
    assert wait_for(lambda: not broker().exists(cycle_queued_key(world.cluster.id)), timeout=30)


def test_a_flag_left_by_a_lost_task_expires_and_later_cycles_run(celery_worker, monkeypatch):
    world = build_world()
    key = cycle_queued_key(world.cluster.id)
    with override_settings(SCHEDULER_CYCLE_QUEUED_TTL_SECONDS=1):
        # The task is lost after its flag was set (e.g. a message dropped by the broker).
        from scheduler.tasks import scheduler_cycle

        sent = []
        with monkeypatch.context() as patch:
            patch.setattr(scheduler_cycle, "delay", lambda *args: sent.append(args))
            lost = submit(world, "lost")
            assert sent == [(world.cluster.id,)] and broker().exists(key)
            # While the flag stands, enqueues are coalesced into the (lost) queued cycle.
            held = submit(world, "held")
            assert sent == [(world.cluster.id,)]
        assert SchedulingCycle.objects.filter(cluster=world.cluster).count() == 0

        assert wait_for(lambda: not broker().exists(key), timeout=10), "the flag never expired"
        later = submit(world, "later")

    assert wait_for(lambda: started([lost, held, later]), timeout=60)


def test_with_redis_away_for_the_flag_the_task_is_still_sent():
    world = build_world()
    with unread_queue() as queue:
        # Only the flag's client reads CELERY_BROKER_URL from the settings; the Celery app
        # keeps its broker connection, so the tasks can still reach the real Redis.
        with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
            assert celery_app.conf.broker_url != settings.CELERY_BROKER_URL
            submit(world, "first")
            submit(world, "second")
        # No flag to coalesce on: every enqueue sent its task.
        assert queued_messages(queue) == 2
        assert not broker().exists(cycle_queued_key(world.cluster.id))


def test_a_cycle_that_skips_gets_one_more_cycle_sent_after_the_holder_commits():
    world = build_world()
    with unread_queue():
        submit(world, "job")  # its cycle waits, unread, in this queue
    with unread_queue() as queue:
        results = cycle_beside_a_holder(world)
        assert results["skipper"] is None and isinstance(results["holder"], SchedulingCycle)
        assert results["requested"]
        # The holder, once committed, found the request and sent the next cycle.
        assert queued_messages(queue) == 1
        assert not cycle_rerun_requested(cluster_id=world.cluster.id)
        broker().delete(cycle_queued_key(world.cluster.id))


def test_without_a_broker_the_holder_runs_the_requested_cycle_itself():
    world = build_world()
    with unread_queue():
        submit(world, "job")
    with eager_tasks():
        results = cycle_beside_a_holder(world)
        assert not cycle_rerun_requested(cluster_id=world.cluster.id)
    assert results["skipper"] is None and results["requested"]
    # The holder's cycle and, inline after its commit, the one the skipper asked for.
    assert SchedulingCycle.objects.filter(cluster=world.cluster).count() == 2


def test_a_cycle_serves_the_requests_made_before_it_took_the_lock():
    world = build_world()
    with unread_queue():
        submit(world, "job")
    with unread_queue() as queue:
        cycle_rerun_request(cluster_id=world.cluster.id)
        assert isinstance(scheduling_cycle_run(cluster_id=world.cluster.id), SchedulingCycle)
        # It read every change the request stood for: no further cycle was sent.
        assert not cycle_rerun_requested(cluster_id=world.cluster.id)
        assert queued_messages(queue) == 0


def test_with_redis_away_for_the_rerun_request_cycles_still_run_and_skip_cleanly():
    world = build_world()
    with unread_queue():
        submit(world, "job")
    with unread_queue() as queue:
        # Only the request's client reads CELERY_BROKER_URL from the settings (see above).
        with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
            results = cycle_beside_a_holder(world)
            # Neither the request nor its lookup could reach Redis: both are logged, and
            # the beat's next cycle reads the change instead.
            assert results["skipper"] is None and not results["requested"]
        assert isinstance(results["holder"], SchedulingCycle)
        assert queued_messages(queue) == 0
    assert not broker().exists(cycle_rerun_key(world.cluster.id))
