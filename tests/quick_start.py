"""Run a script as the quick start would: ``manage.py shell`` in a child process on a SQLite
file of its own, with no broker (tasks run in process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quick_start_json(tmp_path: Path, script: str, *, migrate: bool = False):
    """The JSON value the last line of ``script``'s output holds, run on
    ``tmp_path/quick.sqlite3`` (migrated first when ``migrate``)."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'quick.sqlite3'}",
        "DEBUG": "true",
        "CELERY_BROKER_URL": "",
    }
    run = [sys.executable, "manage.py"]
    if migrate:
        subprocess.run([*run, "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    done = subprocess.run(
        [*run, "shell", "-c", script], cwd=ROOT, env=env, check=True, timeout=300,
        capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])
