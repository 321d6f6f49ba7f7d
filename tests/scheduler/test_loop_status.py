"""The one status line a minute that ``manage.py serve`` prints instead of a line per task."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from celery import schedules
from django.utils import timezone

from governance.management.commands.serve import (
    LAST_ERROR,
    run_status_lines,
    schedule_next_last_run,
)
from scheduler.choices import WorkloadState
from scheduler.models import SchedulingCycle, Workload
from scheduler.selectors.status import loop_status
from scheduler.services.workloads import workload_submit
from tests.scheduler.conftest import build_world

pytestmark = pytest.mark.django_db


def cycle(world, at):
    SchedulingCycle.objects.create(
        cluster=world.cluster, started_at=at, duration_seconds=0.01, policy="fairshare"
    )


def test_the_line_counts_cycles_of_the_last_minute_work_and_nodes():
    world = build_world(nodes=2)
    now = timezone.now()
    for name in ("a", "b", "c"):
        workload_submit(
            project=world.projects["budgeted"], cluster=world.cluster, name=name, gpus=1,
            min_runtime_seconds=600, launch_spec={"command": ["true"]}, now=now,
        )  # fmt: skip
    Workload.objects.filter(name="a").update(state=WorkloadState.RUNNING)
    cycle(world, now - timedelta(seconds=20))
    cycle(world, now - timedelta(seconds=50))
    cycle(world, now - timedelta(seconds=70))  # before the minute

    status = loop_status(now=now)

    assert (status.cycles, status.running, status.pending) == (2, 1, 2)
    assert (status.healthy_nodes, status.nodes) == (2, 2)
    line = status.line("scheduler_cycle: OperationalError: database is locked")
    assert "2 cycles in the last minute · 1 running, 2 pending · 2/2 nodes healthy" in line
    assert line.endswith("last error: scheduler_cycle: OperationalError: database is locked")
    assert status.line().endswith("last error: none")


def test_the_server_writes_a_line_each_period_with_the_last_error():
    build_world(nodes=1)
    lines: list[str] = []
    stop = threading.Event()

    def write(text: str) -> None:
        lines.append(text)
        stop.set()

    LAST_ERROR.record("scheduler_cycle", RuntimeError("boom"))
    try:
        run_status_lines(stop, write, every=0.01)
    finally:
        LAST_ERROR.text = ""
    assert len(lines) == 1
    assert lines[0].endswith("last error: scheduler_cycle: RuntimeError: boom")


def test_an_interval_task_keeps_its_cadence_however_late_the_loop_polls():
    every = schedules.schedule(timedelta(seconds=5))
    start = timezone.now()
    # Polled 0.4 s after each due time, sixty times: the runs still count from their due
    # times, so twelve fall in each minute rather than one fewer.
    last_run = start - every.run_every
    recorded = []
    for _ in range(60):
        due_at = last_run + every.run_every
        last_run = schedule_next_last_run(every, last_run, due_at + timedelta(seconds=0.4))
        recorded.append(last_run)
    assert recorded == [start + i * every.run_every for i in range(60)]


def test_an_interval_task_more_than_an_interval_late_restarts_from_now():
    every = schedules.schedule(timedelta(seconds=5))
    last_run = timezone.now()
    late = last_run + timedelta(seconds=12)  # due at +5 s, then again at +10 s: both missed
    assert schedule_next_last_run(every, last_run, late) == late


def test_a_crontab_task_records_when_it_ran():
    monthly = schedules.crontab(minute=0, hour=6, day_of_month=1)
    last_run = timezone.now()
    now = last_run + timedelta(days=31, seconds=3)
    assert schedule_next_last_run(monthly, last_run, now) == now
