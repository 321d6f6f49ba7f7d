"""Fixtures for the live loop's tests: a small cluster with nodes and a budget tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.db.models import Sum

from governance.models import Allocation, Cluster, Organization, Program, Project
from scheduler.models import Node, Run, UsageRecord
from tests.conftest import attach_daemon_log, tail_of
from tests.factories import UserFactory

# The personas fixture (tests/personas.py), imported as in tests/governance/conftest.py; a
# module that needs another world (settings, nodes) defines its own ``personas``.
from tests.personas import personas  # noqa: F401
from tests.waiting import wait_until


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker of the tests that break shared services on purpose."""
    config.addinivalue_line(
        "markers",
        "faults: kills workers or restarts PostgreSQL/Redis (disturbs other sessions; few, quick)",
    )


@dataclass
class World:
    """An organization with one program (100 %) and projects with the given shares."""

    cluster: Cluster
    nodes: list[Node]
    projects: dict[str, Project]
    program: Program
    user: object
    since: datetime
    extra: dict = field(default_factory=dict)


def build_world(
    *,
    nodes: int = 2,
    gpus_per_node: int = 8,
    shares: dict[str, str | None] | None = None,
    since: datetime | None = None,
) -> World:
    """Create the tree, the cluster and its nodes. A share of ``None``: no allocation."""
    shares = {"budgeted": "100", "unbudgeted": None} if shares is None else shares
    since = since or datetime(2026, 1, 1, tzinfo=UTC)
    user = UserFactory()
    org = Organization.objects.create(name="Loop Org", slug="loop-org")
    cluster = Cluster.objects.create(
        organization=org,
        name="h100",
        slug="h100",
        gpu_type="h100",
        nodes=nodes,
        gpus_per_node=gpus_per_node,
    )
    program = Program.objects.create(organization=org, name="Research", slug="research")
    Allocation.objects.create(
        cluster=cluster, program=program, percent=Decimal(100), valid_from=since, set_by=user,
        reason="test",
    )  # fmt: skip
    projects = {}
    for slug, share in shares.items():
        project = Project.objects.create(program=program, name=slug.title(), slug=slug)
        projects[slug] = project
        if share is not None:
            Allocation.objects.create(
                cluster=cluster, project=project, percent=Decimal(share), valid_from=since,
                set_by=user, reason="test",
            )  # fmt: skip
    node_rows = [
        Node.objects.create(cluster=cluster, name=f"node{i + 1}", gpus=gpus_per_node)
        for i in range(nodes)
    ]
    return World(cluster, node_rows, projects, program, user, since)


@pytest.fixture
def world(db) -> World:
    """Two nodes of 8 GPUs; project ``budgeted`` holds 100 %, ``unbudgeted`` nothing."""
    return build_world()


def ledger_total(cluster: Cluster) -> Decimal:
    """Σ GPU-seconds in the usage ledger of a cluster."""
    return UsageRecord.objects.filter(cluster=cluster).aggregate(t=Sum("gpu_seconds"))[
        "t"
    ] or Decimal(0)


def runs_total(cluster: Cluster, *, now: datetime | None = None) -> Decimal:
    """Σ GPUs x run time of the cluster's runs, computed from the runs themselves.

    Open runs count up to ``now`` (omit ``now`` to require that every run has ended).
    """
    total = Decimal(0)
    for run in Run.objects.filter(cluster=cluster):
        end = run.ended_at or now
        assert end is not None, f"run {run.pk} is still open"
        micro = (end - run.started_at) // timedelta(microseconds=1)
        total += Decimal(run.gpus * micro) / Decimal(1_000_000)
    return total


# --- Real loop processes for the failure tests ------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


class LoopProcesses:
    """A Celery beat and workers of our own, on a queue of our own, against the test DB.

    Unlike the session's ``celery_worker``, these may be killed and restarted by a test.
    Each process leads its own process group so ``kill9`` takes all of it.
    """

    def __init__(self, queue: str, env: dict[str, str]) -> None:
        self.queue = queue
        self.env = env
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    def _spawn(self, name: str, args: list[str], extra: dict[str, str]) -> subprocess.Popen:
        log_path = ROOT / "var" / f"loop-{self.queue}-{name}.log"
        self.logs[name] = log_path
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "governance", *args],
                cwd=ROOT, env={**self.env, **extra}, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.procs[name] = proc
        return proc

    def start_worker(self, name: str = "worker", **extra: str) -> subprocess.Popen:
        """Start a worker and wait until it reports ready (a solo worker busy in a task
        cannot answer a ping, so its log is the signal)."""
        proc = self._spawn(
            name,
            [
                "worker", "--pool=solo", "--concurrency=1", "--loglevel=INFO", "-Q", self.queue,
                "--hostname", f"{name}-{self.queue}@%h", "--without-gossip", "--without-mingle",
            ],
            extra,
        )  # fmt: skip
        ready = wait_until(
            lambda: f"{name}-{self.queue}@" in self.log(name) and " ready." in self.log(name),
            timeout=60,
            stop_if=lambda: proc.poll() is not None,
        )
        if ready:
            return proc
        raise AssertionError(f"worker {name} did not start:\n{self.log(name)[-3000:]}")

    def start_beat(self) -> subprocess.Popen:
        schedule = ROOT / "var" / f"beat-{self.queue}"
        return self._spawn("beat", ["beat", "--loglevel=INFO", "--schedule", str(schedule)], {})

    def kill9(self, name: str) -> None:
        """SIGKILL the process (and its group): no cleanup, no acknowledgement."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def log(self, name: str) -> str:
        return self.logs[name].read_text() if self.logs[name].exists() else ""

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def loop_processes(django_db_setup, settings, request):
    """Beat and workers on a private queue; the test process enqueues to the same queue.

    The beat runs a cycle every second and accounts usage every 2 s; the simulated
    executor and the demo replay are off (they would act on demo clusters only anyway).
    """
    from django.db import connection

    from governance.celery import app

    if settings.CELERY_TASK_ALWAYS_EAGER:
        pytest.fail("the loop processes need CELERY_BROKER_URL (real Redis)")
    queue = f"loop-{uuid.uuid4().hex[:10]}"
    base_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    env = {
        **os.environ,
        "DATABASE_URL": f"{base_url}/{connection.settings_dict['NAME']}",
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "DEBUG": "true",
        "SCHEDULER_CYCLE_SECONDS": "1",
        "SCHEDULER_ACCOUNT_SECONDS": "2",
        "SIMULATED_EXECUTOR_ENABLED": "false",
        "DEMO_REPLAY_ENABLED": "false",
    }
    (ROOT / "var").mkdir(exist_ok=True)
    loop = LoopProcesses(queue, env)
    attach_daemon_log(
        request.node,
        "Celery worker(s) and beat of this test",
        lambda: "".join(f"--- {name}\n{tail_of(path, 3000)}\n" for name, path in loop.logs.items()),
    )
    # The fault tests restart these servers; their own logs say how the restart went.
    for log in sorted(Path("/var/log/postgresql").glob("postgresql-*-main.log")):
        attach_daemon_log(request.node, f"PostgreSQL ({log})", lambda log=log: tail_of(log, 3000))
    redis_log = Path("/var/log/redis/ci.log")
    attach_daemon_log(request.node, f"Redis ({redis_log})", lambda: tail_of(redis_log, 2000))
    original = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        yield loop
    finally:
        app.conf.task_default_queue = original
        loop.stop_all()


def single_start_per_workload(cluster: Cluster) -> None:
    """Assert no workload was ever started twice at once, nor got two start orders per node."""
    from scheduler.models import Order

    for run in Run.objects.filter(cluster=cluster):
        overlapping = Run.objects.filter(
            workload=run.workload, started_at__lt=run.ended_at or datetime.max.replace(tzinfo=UTC)
        ).exclude(pk=run.pk)
        overlapping = [r for r in overlapping if r.ended_at is None or r.ended_at > run.started_at]
        assert not overlapping, f"workload {run.workload_id} ran twice at once"
        starts = Order.objects.filter(run=run, kind="start")
        assert starts.count() == len(run.placement), f"run {run.pk}: {starts.count()} start orders"
