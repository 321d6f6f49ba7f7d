"""The quick start (SQLite, no services) keeps its engine between cycles too: its migration
creates the change-note triggers there, and a cycle reads and deletes the notes."""

from __future__ import annotations

from tests.quick_start import quick_start_json

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
    result = quick_start_json(tmp_path, SCRIPT, migrate=True)
    assert result["engines"] == ["first cycle on this worker", "kept"]
    assert result["starts"] == [1, 1]
    assert result["states"] == ["running", "running"]
    # The second cycle read (and deleted) the notes of the first start and the second
    # submit; what is left is its own start, for the next cycle.
    assert result["noted"] == [result["last"]]
