"""End to end: the real agent process (``python -m scheduler.agent``) on a machine whose
``nvidia-smi`` prints a recorded output, running one workload against the live server; its
run's utilization arrives in ``UtilizationHour`` with what that output implies.

The fake ``nvidia-smi`` is a shell script first on the PATH. It answers only the agent's own
query (``--query-gpu=index,uuid,… --format=csv,nounits``) and prints
``tests/data/nvidia-smi/geforce-1080ti-1060-header-units.csv``: a header naming the columns
(the parser maps them by name and reads the units it finds), then GPU 0 (a GTX 1080 Ti: 36 %
busy, 2,856 MiB used, 106.56 W) and GPU 1 (a GTX 1060: 0 %, 4 MiB, 5.68 W); without an
``index`` column a GPU's index is its row's position. The agent hands out GPUs 0 and 1, so a
2-GPU workload holds both, and by hand:

- busy = 0.36 x the seconds GPU 0 was observed + 0 x GPU 1's, allocated = 2 x the period:
  busy ÷ allocated is 18 % of the observed share. Until a GPU's first sample after the run
  starts (the agent samples every 5 s) it counts as allocated but unobserved, so the share
  is at most 18 % and only a little less;
- memory_max_mib = 2,856 (the larger of the two GPUs' readings, every sample the same);
- power_mean_watts = (106.56 + 5.68) / 2 = 56.12 (the mean per GPU sample).

Conditions are waited for with a deadline; the agent reports every 5 s
(``--utilization-seconds``; 60 by default).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from governance.celery import app as celery_app
from scheduler.models import Node, Run, UtilizationHour
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.executor_reports import node_agent_create
from scheduler.services.workloads import workload_submit
from tests.conftest import attach_daemon_log, wait_for
from tests.personas import build_personas

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "data" / "nvidia-smi" / "geforce-1080ti-1060-header-units.csv"
QUERY = "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total,power.draw"
# An agent stalled between a run's start and its GPUs' next sample (due within 5 s) for
# longer than this would fail the lower bound: generous, so a loaded machine passes.
UNOBSERVED_SECONDS = 15


@pytest.fixture
def eager_cycles():
    """Cycles the services enqueue run in-process, in the live server's request threads."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def fake_nvidia_smi(tmp_path) -> Path:
    """A directory holding an ``nvidia-smi`` that answers the agent's query only."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" --format=csv,nounits "*) ;; *) bad=1 ;; esac\n'
        f'case " $* " in *" {QUERY} "*) ;; *) bad=1 ;; esac\n'
        'if [ -n "$bad" ]; then echo "fake nvidia-smi: unexpected: $*" >&2; exit 6; fi\n'
        f'exec cat "{RECORDED}"\n'
    )
    script.chmod(0o755)
    return bin_dir


@pytest.fixture
def agent_process(live_server, eager_cycles, fake_nvidia_smi, tmp_path, request):
    """The personas' world and ``python -m scheduler.agent`` for node-1 (GPUs 0 and 1)."""
    world = build_personas()
    _, token = node_agent_create(cluster=world.cluster, name="node-1")
    log_path = tmp_path / "agent.log"
    env = {
        **os.environ,
        "PATH": f"{fake_nvidia_smi}{os.pathsep}{os.environ.get('PATH', '')}",
        "GPU_AGENT_TOKEN": token,
    }
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "scheduler.agent", "--node", "node-1", "--gpus", "0,1",
                "--server", live_server.url, "--poll-seconds", "0.2",
                "--heartbeat-seconds", "1", "--grace-seconds", "1",
                "--utilization-seconds", "5",
            ],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    attach_daemon_log(request.node, "agent", lambda: log_path.read_text(errors="replace"))
    try:
        assert wait_for(lambda: Node.objects.filter(name="node-1").exists(), timeout=60), (
            log_path.read_text()
        )
        yield world, log_path
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_the_agent_reports_what_nvidia_smi_says_of_the_run(agent_process):
    world, log_path = agent_process
    assert "GPU telemetry: nvidia-smi (" in log_path.read_text(), log_path.read_text()
    workload = workload_submit(
        project=world.project_a1,
        cluster=world.cluster,
        name="train",
        gpus=2,
        min_runtime_seconds=0,
        launch_spec={"command": ["sleep", "600"]},
    )

    def started() -> Run | None:
        # A cycle each poll, as the loop's periodic one would run it. Cycles here run in
        # process, on each change, with no periodic loop: the submit's own cycle skips when
        # it meets the node registration's cycle still holding the lock. That holder then
        # runs it after its commit (a rerun request, ``cycle_queue``); this stands in for
        # the beat, which covers the rare request that misses the holder's look.
        scheduling_cycle_run(cluster_id=world.cluster.id)
        return Run.objects.filter(workload=workload).first()

    run = wait_for(started, timeout=30)
    assert run is not None
    # The first report comes after the agent's first period.
    rows = wait_for(lambda: list(UtilizationHour.objects.filter(run=run)), timeout=150)
    assert rows, log_path.read_text()[-3000:]
    allocated = sum(r.allocated_gpu_seconds for r in rows)
    busy = sum(r.busy_gpu_seconds for r in rows)
    covered = sum(r.covered_seconds for r in rows)
    assert {r.node.name for r in rows} == {"node-1"}
    # Both GPUs for the whole period (the agent rounds to the microsecond on its side).
    assert abs(allocated - 2 * covered) <= Decimal("0.00001")
    share = Decimal("0.18")
    # The agent rounds each period's busy GPU-seconds to the microsecond.
    assert busy <= share * allocated + Decimal("0.0001")
    assert busy >= share * (allocated - 2 * UNOBSERVED_SECONDS), busy / allocated
    assert max(r.memory_max_mib for r in rows) == 2856
    assert {r.power_mean_watts for r in rows} == {Decimal("56.120")}
    assert sum(r.samples for r in rows) > 0
