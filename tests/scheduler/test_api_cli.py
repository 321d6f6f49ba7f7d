"""``python -m scheduler.cli`` against a live server: token, submit, list, show, cancel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from governance.celery import app as celery_app
from scheduler.choices import WorkloadState
from scheduler.cli import parse_duration
from scheduler.models import Workload
from tests.personas import build_personas

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(settings):
    """The personas; submits' cycles run in the server's threads (no worker needed)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield build_personas()
    celery_app.conf.task_always_eager = previous


def cli(live_server, *args, token: str = "") -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "GOVERNANCE_SERVER": live_server.url, "GOVERNANCE_TOKEN": token}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def token(live_server, world):
    result = cli(live_server, "token", "--username", "researcher", "--password", world.password)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_submit_list_show_and_cancel(live_server, world, token):
    submitted = cli(
        live_server, "--json", "submit", "--project", "detection", "--gpus", "2",
        "--min-runtime", "30m", "--name", "from-cli", "--", "python", "train.py", "--lr", "3e-4",
        token=token,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    workload = Workload.objects.get(name="from-cli")
    assert workload.min_runtime_seconds == 1800
    assert workload.launch_spec == {"command": ["python", "train.py", "--lr", "3e-4"]}
    assert workload.submitted_by == world.researcher

    listed = cli(live_server, "list", token=token)
    assert listed.returncode == 0 and "from-cli" in listed.stdout
    shown = cli(live_server, "show", str(workload.pk), token=token)
    assert shown.returncode == 0
    assert f"Workload {workload.pk}: from-cli" in shown.stdout
    assert "minimum runtime 30m" in shown.stdout

    cancelled = cli(live_server, "cancel", str(workload.pk), token=token)
    assert cancelled.returncode == 0, cancelled.stderr
    workload.refresh_from_db()
    assert workload.state == WorkloadState.CANCELLED


def test_refusals_name_the_field_and_exit_1(live_server, world, token):
    result = cli(
        live_server, "submit", "--project", "translation", "--gpus", "2", "--", "true",
        token=token,
    )  # fmt: skip
    assert result.returncode == 1
    assert "project: No project you belong to is 'translation'." in result.stderr
    too_big = cli(
        live_server, "submit", "--project", "detection", "--gpus", "64", "--", "true", token=token
    )
    assert too_big.returncode == 1 and "gpus:" in too_big.stderr
    assert not Workload.objects.exists()


def test_a_sweep_from_a_file_all_or_none(live_server, world, token, tmp_path):
    sweep = [
        {"project": "detection", "gpus": 1, "min_runtime_seconds": 900, "name": f"lr-{i}",
         "launch_spec": {"command": ["python", "train.py", "--lr", f"0.0{i}"]}}
        for i in range(1, 4)
    ]  # fmt: skip
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([*sweep, {**sweep[0], "gpus": 64}]))
    refused = cli(live_server, "submit-many", str(bad), token=token)
    assert refused.returncode == 1
    assert "workloads[3].gpus" in refused.stderr
    assert not Workload.objects.exists()

    good = tmp_path / "sweep.json"
    good.write_text(json.dumps({"workloads": sweep}))
    queued = cli(live_server, "submit-many", str(good), token=token)
    assert queued.returncode == 0, queued.stderr
    assert queued.stdout.startswith("Queued 3 workloads")
    assert sorted(Workload.objects.values_list("name", flat=True)) == ["lr-1", "lr-2", "lr-3"]

    missing = cli(live_server, "submit-many", str(tmp_path / "nope.json"), token=token)
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_without_a_token_nothing_is_submitted(live_server, world):
    result = cli(live_server, "submit", "--project", "detection", "--gpus", "1", "--", "true")
    assert result.returncode == 1
    assert not Workload.objects.exists()


@pytest.mark.parametrize(
    ("text", "seconds"), [("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("90s", 90), ("45", 45)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1d", "m30", "1h 30m", "-5"])
def test_bad_durations(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)
