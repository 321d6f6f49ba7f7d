"""Data safety: a ``pg_dump -Fc`` backup restored into a fresh database gives the same
owed/delivered figures (the operator's commands are in docs/operations-backup.md).

The world is built through the live loop's own services on the test database, with a fixed
clock: three projects (60 %, 40 %, no share) on two 8-GPU nodes, a few scheduling cycles,
accounting passes (usage and entitlement ledgers, hourly rollup), a finished run, a free-lane
run and a daily-cache refresh. The figures are those the dashboards show — the
owed/delivered rows per node of the tree and the hourly and daily time series, read by
``governance.selectors.usage`` as an org admin. The backup is taken with ``pg_dump -Fc`` and
restored with ``pg_restore`` into a database with a unique name (dropped afterwards); a
separate Python process with ``DATABASE_URL`` pointing at the restored database computes the
figures again. Nothing on the shared server is touched but those two databases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from shutil import which

import pytest
from django.db import connection

from governance.celery import app as celery_app
from governance.models import Cluster
from tests.factories import org_admin_of
from tests.scheduler.conftest import build_world, ledger_total, runs_total

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
DAY_START = datetime(2026, 3, 2, tzinfo=UTC)
# Two whole days: the first closed day is read from the daily cache, the hours from the rollup.
PERIOD_END = DAY_START + timedelta(days=2)

pytestmark = pytest.mark.django_db(transaction=True)


def owed_delivered_figures(*, user_id: int, cluster_id: int) -> str:
    """The dashboards' owed/delivered figures for one user, as canonical JSON.

    Called in this process on the test database and in a subprocess on the restored one;
    the two strings must be equal.
    """
    from django.contrib.auth import get_user_model

    from governance.selectors.usage import usage_by_tree_node, usage_timeseries
    from governance.selectors.visibility import user_visibility

    user = get_user_model().objects.get(pk=user_id)
    visibility = user_visibility(user=user)
    cluster = Cluster.objects.get(pk=cluster_id)
    figures = {
        "tree_cluster": [
            asdict(row)
            for row in usage_by_tree_node(
                visibility=visibility, cluster=cluster, start=DAY_START, end=PERIOD_END
            )
        ],
        "tree_all_clusters": [
            asdict(row)
            for row in usage_by_tree_node(
                visibility=visibility, cluster=None, start=DAY_START, end=PERIOD_END
            )
        ],
        "hourly": [
            asdict(point)
            for point in usage_timeseries(
                visibility=visibility, cluster=cluster, start=DAY_START, end=PERIOD_END
            )
        ],
        "daily": [
            asdict(point)
            for point in usage_timeseries(
                visibility=visibility,
                cluster=cluster,
                start=DAY_START,
                end=PERIOD_END,
                bucket="day",
            )
        ],
    }
    return json.dumps(figures, default=str, sort_keys=True)


def build_usage_world():
    """Cycles, runs, ledgers and rollups on a fixed clock; returns (world, org admin)."""
    from governance.services.reports import usage_days_refresh
    from scheduler.choices import ExitOutcome
    from scheduler.models import Run
    from scheduler.services.cycle import scheduling_cycle_run
    from scheduler.services.executor_reports import run_report_exit
    from scheduler.services.usage import usage_account
    from scheduler.services.workloads import workload_submit

    world = build_world(shares={"alpha": "60", "beta": "40", "gamma": None}, since=T0 - 30 * MIN)
    admin = org_admin_of(world.cluster.organization).user

    def submit(project: str, gpus: int, min_runtime: int, at: datetime):
        return workload_submit(
            project=world.projects[project], cluster=world.cluster, name=f"{project}-{gpus}",
            gpus=gpus, min_runtime_seconds=min_runtime, launch_spec={"command": ["true"]},
            now=at,
        )  # fmt: skip

    def cycle(at: datetime) -> None:
        scheduling_cycle_run(cluster_id=world.cluster.id, now=at)

    alpha = submit("alpha", 8, 600, T0)
    beta = submit("beta", 8, 600, T0)
    gamma = submit("gamma", 4, 0, T0)  # free lane: waits for a free node
    cycle(T0)
    for minutes in (20, 40, 60, 80):
        usage_account(cluster=world.cluster, now=T0 + minutes * MIN)
    alpha_run = Run.objects.get(workload=alpha)
    run_report_exit(run=alpha_run, outcome=ExitOutcome.SUCCEEDED, exit_code=0, now=T0 + 90 * MIN)
    cycle(T0 + 90 * MIN)  # gamma takes alpha's node
    for minutes in (120, 150, 180):
        usage_account(cluster=world.cluster, now=T0 + minutes * MIN)
    for workload in (beta, gamma):
        run = Run.objects.get(workload=workload, ended_at__isnull=True)
        run_report_exit(run=run, outcome=ExitOutcome.SUCCEEDED, exit_code=0, now=T0 + 200 * MIN)
    usage_account(cluster=world.cluster, now=T0 + 210 * MIN)
    # An accounting pass the next morning closes the first day; roll it into the daily cache.
    usage_account(cluster=world.cluster, now=DAY_START + timedelta(days=1, hours=2))
    assert usage_days_refresh(cluster=world.cluster) >= 1
    return world, admin


def pg_args() -> list[str]:
    """Host, port and user of the test database's server, for the PostgreSQL client tools."""
    db = connection.settings_dict
    args = ["-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432)]
    return [*args, "-U", db["USER"] or "postgres"]


@pytest.fixture
def restored_database():
    """A fresh database name on the test server; dropped after the test."""
    missing = [t for t in ("pg_dump", "pg_restore", "createdb", "dropdb") if not which(t)]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not found: install the PostgreSQL client tools "
            "(apt-get install postgresql-client)"
        )
    name = f"restore_{uuid.uuid4().hex[:12]}"
    yield name
    subprocess.run(
        ["dropdb", *pg_args(), "--if-exists", "--force", name], capture_output=True, timeout=60
    )


@pytest.fixture
def unread_queue():
    """Send the cycles enqueued by submits to a queue no worker reads (the test runs its own
    cycles on a fixed clock; a session-wide worker would otherwise run one at today's time)."""
    import redis
    from django.conf import settings

    original = celery_app.conf.task_default_queue
    queue = f"unread-{uuid.uuid4().hex[:12]}"
    celery_app.conf.task_default_queue = queue
    yield queue
    celery_app.conf.task_default_queue = original
    if settings.CELERY_BROKER_URL:
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(queue)


def test_backup_restored_into_a_fresh_database_gives_identical_owed_and_delivered(
    tmp_path, restored_database, unread_queue
):
    world, admin = build_usage_world()
    # The world is not trivial: runs ended and were charged, entitlement was sampled.
    # alpha 8 GPUs x 90 min + beta 8 GPUs x 200 min + gamma 4 GPUs x 110 min (free lane).
    assert (
        ledger_total(world.cluster)
        == runs_total(world.cluster)
        == 8 * 90 * 60 + (8 * 200 * 60 + 4 * 110 * 60)
    )
    before = owed_delivered_figures(user_id=admin.pk, cluster_id=world.cluster.pk)
    rows = json.loads(before)["tree_cluster"]
    assert [r["name"] for r in rows if r["kind"] == "project"] == ["Alpha", "Beta", "Gamma"]
    assert all(float(r["owed_gpu_seconds"]) > 0 for r in rows if r["name"] in ("Alpha", "Beta"))

    dump = tmp_path / "governance.dump"
    source = connection.settings_dict["NAME"]
    subprocess.run(
        ["pg_dump", *pg_args(), "-Fc", "--no-owner", "-f", str(dump), source],
        check=True, timeout=120,
    )  # fmt: skip
    subprocess.run(["createdb", *pg_args(), restored_database], check=True, timeout=60)
    subprocess.run(
        ["pg_restore", *pg_args(), "--no-owner", "--exit-on-error", "-d", restored_database,
         str(dump)],
        check=True, timeout=120,
    )  # fmt: skip

    base_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/x")
    code = (
        "import django; django.setup();"
        "from tests.governance.test_backup_restore import owed_delivered_figures;"
        f"print(owed_delivered_figures(user_id={admin.pk}, cluster_id={world.cluster.pk}))"
    )
    restored = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "governance.settings",
            "DATABASE_URL": f"{base_url.rsplit('/', 1)[0]}/{restored_database}",
            "DEBUG": "true",
        },
    )  # fmt: skip
    assert restored.returncode == 0, restored.stderr[-3000:]
    after = restored.stdout.strip().splitlines()[-1]
    assert json.loads(after) == json.loads(before)
    assert after == before
