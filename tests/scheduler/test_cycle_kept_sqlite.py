"""The quick start (SQLite, no services) keeps its engine between cycles too: its migration
creates the change-note triggers there, and a cycle reads and deletes the notes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Without a broker every submit runs a cycle at once, in process, at the real time.
SCRIPT = """
import json
from scheduler.models import SchedulingCycle, Workload, WorkloadChange
from scheduler.services.workloads import workload_submit
from tests.scheduler.conftest import build_world

world = build_world()
submitted = [
    workload_submit(
        project=world.projects["budgeted"], cluster=world.cluster, name=name, gpus=8,
        min_runtime_seconds=600, launch_spec={"command": ["x"]},
    )
    for name in ("a", "b")
]
print(json.dumps({
    "engines": list(SchedulingCycle.objects.order_by("id").values_list("engine", flat=True)),
    "starts": list(SchedulingCycle.objects.order_by("id").values_list("starts", flat=True)),
    "states": sorted(Workload.objects.values_list("state", flat=True)),
    "noted": sorted(set(WorkloadChange.objects.values_list("workload_id", flat=True))),
    "last": submitted[-1].id,
}))
"""


def test_the_quick_start_database_notes_changes_and_keeps_the_engine(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'quick.sqlite3'}",
        "DEBUG": "true",
        "CELERY_BROKER_URL": "",
    }
    run = [sys.executable, "manage.py"]
    subprocess.run([*run, "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    done = subprocess.run(
        [*run, "shell", "-c", SCRIPT], cwd=ROOT, env=env, check=True, timeout=300,
        capture_output=True, text=True,
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["engines"] == ["first cycle on this worker", "kept"]
    assert result["starts"] == [1, 1]
    assert result["states"] == ["running", "running"]
    # The second cycle read (and deleted) the notes of the first start and the second
    # submit; what is left is its own start, for the next cycle.
    assert result["noted"] == [result["last"]]
