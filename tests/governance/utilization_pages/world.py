"""The day the utilization pages are tested on, with hand-worked numbers (against PostgreSQL).

The personas' cluster; yesterday (D), in GPU-seconds:

ledger (``UsageHour``)                       telemetry (``UtilizationHour``, allocated / busy)
  Detection    D 10:00 budgeted 28,800         run A (Detection)   D 10:00  28,800 / 14,400
  Detection    D 11:00 budgeted 14,400         run A (Detection)   D 11:00   7,200 /    720
  Translation  D 10:00 budgeted 7,200 + free 3,600   run B (Translation) D 10:00 10,800 / 10,800
  Segmentation D 10:00 budgeted 3,600          (no telemetry)
and 40 days earlier run B 3,600 / 0 (outside every period the tests read but in B's own trace).

Cluster, period: measured 46,800 (13 GPU-h) of the ledger's 57,600 (16 GPU-h) = 81.25 %
coverage; busy 25,920 (7.2 GPU-h): utilization 25,920 ÷ 46,800 = 55.38 %.
Detection: measured 36,000 (10 GPU-h) of 43,200 = 83.33 %; busy 15,120 (4.2 GPU-h) = 42 %;
allocated but idle 20,880 = 5.8 GPU-h. Translation: 10,800 of 10,800, 100 % busy, idle 0.
Segmentation: no telemetry (1 GPU-h in the ledger). Vision = Detection (5.8 idle; Segmentation
adds nothing), Language = 0, Acme = 5.8.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from scheduler.models import Run, UsageHour, UtilizationHour
from scheduler.services.workloads import workload_submit
from tests.scheduler.agent_api import started_run
from tests.scheduler.test_utilization_store import node_of

HEALTH = "/dashboards/health/"
DELIVERY = "/dashboards/delivery/"
REPORT = "/reports/usage/"
IDLE_HEADER = "GPU-hours allocated but idle"


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """Cheap password hashing: every test signs in."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def client_for(user) -> Client:
    """A test client signed in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def yesterday() -> datetime:
    """D: yesterday's midnight, UTC."""
    today = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=1)


def run_in(personas, project, node, name: str) -> Run:
    """A started 8-GPU run of a new workload of ``project`` on ``node``."""
    workload = workload_submit(
        project=project,
        cluster=personas.cluster,
        name=name,
        gpus=8,
        min_runtime_seconds=600,
        launch_spec={"command": ["python", "train.py"]},
        submitted_by=personas.org_admin,
    )
    return started_run(workload, node)


def measured(run: Run, node, hour: datetime, allocated: int, busy: int) -> None:
    """The run's telemetry for one whole hour: allocated and busy GPU-seconds."""
    UtilizationHour.objects.create(
        run=run,
        project_id=run.project_id,
        cluster_id=run.cluster_id,
        node=node,
        hour=hour,
        allocated_gpu_seconds=Decimal(allocated),
        busy_gpu_seconds=Decimal(busy),
        samples=720,
        covered_from=hour,
        reported_until=hour + timedelta(hours=1),
        covered_seconds=Decimal(3600),
    )


def ledger(personas, project, hour: datetime, **seconds) -> None:
    """The ledger's hour row of ``project`` (``budgeted=…``, ``free=…`` GPU-seconds)."""
    UsageHour.objects.create(
        cluster=personas.cluster,
        project=project,
        hour=hour,
        **{f"{name}_gpu_seconds": Decimal(value) for name, value in seconds.items()},
    )


@pytest.fixture
def world(personas):
    """This module's day; runs A and B open and marked idle."""
    day = yesterday()
    h10, h11 = day + timedelta(hours=10), day + timedelta(hours=11)
    ledger(personas, personas.project_a1, h10, budgeted=28800)
    ledger(personas, personas.project_a1, h11, budgeted=14400)
    ledger(personas, personas.project_b1, h10, budgeted=7200, free=3600)
    ledger(personas, personas.project_a2, h10, budgeted=3600)
    node = node_of(personas.cluster, "node-1")
    run_a = run_in(personas, personas.project_a1, node, "detector-notebook")
    run_b = run_in(personas, personas.project_b1, node, "translator")
    run_quiet = run_in(personas, personas.project_a2, node, "segmenter")
    measured(run_a, node, h10, 28800, 14400)
    measured(run_a, node, h11, 7200, 720)
    measured(run_b, node, h10, 10800, 10800)
    measured(run_b, node, day - timedelta(days=40), 3600, 0)
    idle_since = timezone.now() - timedelta(minutes=45)
    Run.objects.filter(pk__in=[run_a.pk, run_b.pk]).update(idle_since=idle_since)
    return {"day": day, "run_a": run_a, "run_b": run_b, "run_quiet": run_quiet}
