"""The loop survives its processes and services failing: each test really does it.

- kill -9 the worker in the middle of a cycle (it sleeps holding the cycle lock);
- restart PostgreSQL while the loop runs;
- restart Redis (it keeps nothing on disk: queued messages are gone).
After each: no workload started twice, the ledger equals Σ GPUs x run time, and the loop
carries on by itself (the beat's next cycle does the work; nobody re-enqueues by hand).

These disturb other sessions on the same services: marked ``faults``, few and quick.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from django.db import connection

from scheduler.choices import ExitOutcome, OrderKind
from scheduler.models import Order, Run, SchedulingCycle
from scheduler.services.executor_reports import run_report_exit
from scheduler.services.locks import CYCLE_LOCK
from scheduler.services.usage import usage_account
from scheduler.services.workloads import workload_submit
from tests.conftest import wait_for
from tests.scheduler.conftest import (
    build_world,
    ledger_total,
    runs_total,
    single_start_per_workload,
)

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

REDIS_START = [
    "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379",
    "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis",
    "--logfile", "/var/log/redis/ci.log",
]  # fmt: skip


def submit(world, name: str, gpus: int = 8):
    return workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name=name, gpus=gpus,
        min_runtime_seconds=600, launch_spec={"command": ["true"]},
    )  # fmt: skip


def started(workload) -> bool:
    return Order.objects.filter(run__workload=workload, kind=OrderKind.START).exists()


def cycle_lock_held(cluster_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND classid = %s AND objid = %s",
            [CYCLE_LOCK, cluster_id],
        )
        return cursor.fetchone()[0] > 0


def settle_and_check_ledger(world) -> None:
    """End every run through the executors' service, then compare ledger and runs."""
    for run in Run.objects.filter(cluster=world.cluster, ended_at__isnull=True):
        run_report_exit(run=run, outcome=ExitOutcome.SUCCEEDED, exit_code=0)
    usage_account(cluster=world.cluster)
    single_start_per_workload(world.cluster)
    assert ledger_total(world.cluster) == runs_total(world.cluster)
    assert ledger_total(world.cluster) > 0


def test_worker_killed_mid_cycle_loses_nothing_and_the_next_cycle_proceeds(loop_processes):
    world = build_world()
    loop_processes.start_beat()
    loop_processes.start_worker("doomed", SCHEDULER_CYCLE_PAUSE_SECONDS="120")
    workload = submit(world, "job")

    assert wait_for(lambda: cycle_lock_held(world.cluster.id), timeout=30), loop_processes.log(
        "doomed"
    )[-3000:]
    loop_processes.kill9("doomed")

    # The server rolls the dead worker's transaction back and frees its lock at once.
    assert wait_for(lambda: not cycle_lock_held(world.cluster.id), timeout=10)
    assert not Run.objects.filter(workload=workload).exists()

    loop_processes.start_worker("replacement")
    assert wait_for(lambda: started(workload), timeout=30), loop_processes.log("replacement")[
        -3000:
    ]
    # Two more cycles run after the start: none may start it again.
    cycles = SchedulingCycle.objects.filter(cluster=world.cluster)
    seen = cycles.count()
    assert wait_for(lambda: cycles.count() >= seen + 2, timeout=30), loop_processes.log(
        "replacement"
    )[-3000:]
    assert Run.objects.filter(workload=workload).count() == 1
    settle_and_check_ledger(world)


def test_postgresql_restart_during_the_loop(loop_processes):
    world = build_world()
    loop_processes.start_beat()
    loop_processes.start_worker()
    first = submit(world, "before")
    assert wait_for(lambda: started(first), timeout=30), loop_processes.log("worker")[-3000:]

    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        timeout=120,
    )
    connection.close()  # ours died with the server too

    second = submit(world, "after")
    assert wait_for(lambda: started(second), timeout=60), loop_processes.log("worker")[-3000:]
    assert loop_processes.procs["worker"].poll() is None  # the worker reconnected, not died
    settle_and_check_ledger(world)


def test_redis_restart_during_the_loop(loop_processes):
    world = build_world()
    loop_processes.start_beat()
    loop_processes.start_worker()
    first = submit(world, "before")
    assert wait_for(lambda: started(first), timeout=30), loop_processes.log("worker")[-3000:]

    subprocess.run(["redis-cli", "-h", "127.0.0.1", "shutdown", "nosave"], timeout=30)
    subprocess.run(REDIS_START, check=True, timeout=30)
    assert wait_for(
        lambda: (
            subprocess.run(
                ["redis-cli", "-h", "127.0.0.1", "ping"], capture_output=True
            ).stdout.strip()
            == b"PONG"
        ),
        timeout=30,
    )

    # The submit's own enqueue may hit a stale broker connection; the beat's next cycle
    # (every second here) picks the workload up either way.
    second = submit(world, "after")
    assert wait_for(lambda: started(second), timeout=90), loop_processes.log("worker")[-3000:]
    settle_and_check_ledger(world)
