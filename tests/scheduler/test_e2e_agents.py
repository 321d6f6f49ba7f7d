"""End to end: real PostgreSQL, Redis, a Celery worker and beat, the live server, and two
``manage.py run_agent`` subprocesses running real commands.

- Acceptance 1: an unbudgeted job fills the cluster; a budgeted job arrives; the unbudgeted
  one is preempted only after its minimum runtime, requeued, and later finishes; the ledger
  shows budgeted, burst and free time exactly.
- An agent dies (kill -9) and comes back: its node is marked down when its heartbeat lapses,
  its work is requeued and runs elsewhere; the restarted agent brings the node back and work
  lands on it again.
- A drain with agents: the node empties as its workloads pass their minimum runtime, with no
  operator action beyond the drain request.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.db.models import Sum
from django.utils import timezone

from scheduler.choices import Charge, NodeState, RunEndReason, WorkloadState
from scheduler.models import Node, Run, UsageRecord, Workload
from scheduler.services.executor_reports import node_agent_create
from scheduler.services.nodes import node_drain
from scheduler.services.workloads import workload_submit
from tests.conftest import attach_daemon_log, wait_for
from tests.scheduler.conftest import (
    build_world,
    ledger_total,
    runs_total,
    single_start_per_workload,
)

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
AGENT_TIMEOUT = 4  # seconds of silence before a node is marked down (test setting)


class AgentProcess:
    """``manage.py run_agent`` for one node, as a subprocess leading its own process group."""

    def __init__(self, *, name: str, token: str, server: str, log_dir: Path) -> None:
        self.name, self.token, self.server, self.log_dir = name, token, server, log_dir
        self.log_path = ROOT / "var" / f"agent-{name}-{uuid.uuid4().hex[:8]}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> AgentProcess:
        self.log_path.parent.mkdir(exist_ok=True)
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "manage.py", "run_agent", "--node", self.name,
                    "--gpus", "0,1", "--server", self.server, "--poll-seconds", "0.2",
                    "--heartbeat-seconds", "1", "--grace-seconds", "3",
                    "--log-dir", str(self.log_dir / self.name),
                ],
                cwd=ROOT, env={**os.environ, "DEBUG": "true", "GPU_AGENT_TOKEN": self.token},
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""


@pytest.fixture
def cluster_loop(loop_processes, live_server, settings, tmp_path, request):
    """Two nodes of 2 GPUs with an agent each, a worker and a beat (cycles every second)."""
    settings.SCHEDULER_AGENT_TIMEOUT_SECONDS = AGENT_TIMEOUT  # the server's heartbeat advice
    world = build_world(nodes=2, gpus_per_node=2)
    loop_processes.env["SCHEDULER_HEARTBEAT_CHECK_SECONDS"] = "1"
    loop_processes.env["SCHEDULER_AGENT_TIMEOUT_SECONDS"] = str(AGENT_TIMEOUT)
    loop_processes.start_beat()
    loop_processes.start_worker()
    agents = {}
    for node in world.nodes:
        _, token = node_agent_create(cluster=world.cluster, name=node.name)
        agents[node.name] = AgentProcess(
            name=node.name, token=token, server=live_server.url, log_dir=tmp_path
        ).start()
        attach_daemon_log(request.node, f"agent {node.name}", agents[node.name].log)
    world.extra["agents"] = agents
    world.extra["loop"] = loop_processes
    assert wait_for(
        lambda: (
            Node.objects.filter(cluster=world.cluster, last_heartbeat__isnull=False).count() == 2
        ),
        timeout=60,
    ), "\n".join(a.log()[-2000:] for a in agents.values())
    yield world
    for agent in agents.values():
        agent.stop()


def submit(world, project: str, name: str, command: list[str], *, gpus: int, nodes: int = 1,
           min_runtime: int = 0) -> Workload:  # fmt: skip
    return workload_submit(
        project=world.projects[project], cluster=world.cluster, name=name, gpus=gpus,
        nodes=nodes, min_runtime_seconds=min_runtime, launch_spec={"command": command},
    )  # fmt: skip


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def state(workload: Workload) -> str:
    return Workload.objects.get(pk=workload.pk).state


def gpu_seconds(runs) -> Decimal:
    return sum(
        (Decimal(r.gpus) * Decimal((r.ended_at - r.started_at) // timedelta(microseconds=1))
         / Decimal(1_000_000) for r in runs),
        Decimal(0),
    )  # fmt: skip


def charged(world, charge: str) -> Decimal:
    rows = UsageRecord.objects.filter(cluster=world.cluster, charge=charge)
    return rows.aggregate(s=Sum("gpu_seconds"))["s"] or Decimal(0)


def diagnostics(world) -> str:
    logs = [a.log()[-1500:] for a in world.extra["agents"].values()]
    return "\n---\n".join([*logs, world.extra["loop"].log("worker")[-3000:]])


def test_budgeted_work_preempts_unbudgeted_work_only_after_its_minimum_runtime(cluster_loop):
    world = cluster_loop
    # An unbudgeted gang fills the cluster (both nodes), protected for 6 s in each run.
    unbudgeted = submit(world, "unbudgeted", "fill", ["sleep", "12"], gpus=4, nodes=2,
                        min_runtime=6)  # fmt: skip
    assert wait_for(lambda: state(unbudgeted) == WorkloadState.RUNNING, timeout=30), diagnostics(
        world
    )
    # A budgeted job arrives, and a free-lane one.
    budgeted = submit(world, "budgeted", "paper", ["sleep", "4"], gpus=2, min_runtime=5)
    free = submit(world, "budgeted", "scratch", ["sleep", "3"], gpus=2, min_runtime=0)

    done = (WorkloadState.SUCCEEDED,)
    assert wait_for(
        lambda: all(state(w) in done for w in (unbudgeted, budgeted, free)), timeout=120
    ), diagnostics(world)

    first, *later = Run.objects.filter(workload=unbudgeted).order_by("attempt")
    # Preempted by the budgeted job, and only once its minimum runtime had passed.
    assert first.end_reason == RunEndReason.PREEMPTED
    assert first.preempted_by_id == budgeted.pk
    assert first.stop_requested_at - first.started_at >= timedelta(seconds=6)
    budgeted_run = Run.objects.get(workload=budgeted)
    assert budgeted_run.started_at - first.started_at >= timedelta(seconds=6)
    # Requeued, and it later finished.
    assert later and later[-1].end_reason == RunEndReason.SUCCEEDED
    assert later[0].started_at >= first.ended_at

    # The ledger: budgeted, burst and free time, each exactly Σ GPUs x run time.
    assert charged(world, Charge.BUDGETED) == gpu_seconds(Run.objects.filter(workload=budgeted))
    assert charged(world, Charge.BURST) == gpu_seconds(Run.objects.filter(workload=unbudgeted))
    assert charged(world, Charge.FREE) == gpu_seconds(Run.objects.filter(workload=free))
    assert ledger_total(world.cluster) == runs_total(world.cluster)
    single_start_per_workload(world.cluster)


def test_an_agent_dies_and_comes_back(cluster_loop, tmp_path):
    world = cluster_loop
    pids = tmp_path / "pids"
    command = ["/bin/sh", "-c", f"echo $$ >> {pids}; exec sleep 6"]
    job = submit(world, "budgeted", "long", command, gpus=2)
    assert wait_for(lambda: state(job) == WorkloadState.RUNNING, timeout=30), diagnostics(world)
    assert wait_for(pids.exists, timeout=30)
    first = Run.objects.get(workload=job)
    (victim_node,) = first.placement
    victim = world.extra["agents"][victim_node]

    victim.kill9()  # no goodbye: its process dies with it, nobody tells the server
    first_pid = int(pids.read_text().split()[0])
    assert wait_for(lambda: not alive(first_pid), timeout=10)
    assert wait_for(
        lambda: Node.objects.get(cluster=world.cluster, name=victim_node).state == NodeState.DOWN,
        timeout=30,
    ), diagnostics(world)
    first.refresh_from_db()
    assert first.end_reason == RunEndReason.NODE_DOWN
    # Requeued, it runs on the other node and finishes there.
    assert wait_for(lambda: state(job) == WorkloadState.SUCCEEDED, timeout=60), diagnostics(world)
    second = Run.objects.get(workload=job, attempt=2)
    assert victim_node not in second.placement

    victim.start()  # the agent comes back: the node returns and takes work again
    assert wait_for(
        lambda: (
            Node.objects.get(cluster=world.cluster, name=victim_node).state == NodeState.HEALTHY
        ),
        timeout=30,
    ), diagnostics(world)
    both = [submit(world, "budgeted", f"after-{i}", ["sleep", "2"], gpus=2) for i in range(2)]
    assert wait_for(lambda: all(state(w) == WorkloadState.SUCCEEDED for w in both), timeout=60), (
        diagnostics(world)
    )
    used = {node for w in both for node in Run.objects.get(workload=w).placement}
    assert victim_node in used
    assert ledger_total(world.cluster) == runs_total(world.cluster)
    single_start_per_workload(world.cluster)


def test_a_drain_empties_the_node_as_workloads_pass_their_minimum_runtime(cluster_loop):
    world = cluster_loop
    short = submit(world, "budgeted", "short", ["sleep", "30"], gpus=1, min_runtime=2)
    longer = submit(world, "budgeted", "longer", ["sleep", "30"], gpus=1, min_runtime=6)
    assert wait_for(lambda: state(short) == state(longer) == WorkloadState.RUNNING, timeout=30), (
        diagnostics(world)
    )
    (node_name,) = Run.objects.get(workload=short).placement
    node = Node.objects.get(cluster=world.cluster, name=node_name)
    on_node = [w for w in (short, longer) if node_name in Run.objects.get(workload=w).placement]
    drain_requested = timezone.now()
    node_drain(node=node, actor=world.user, reason="fan failure", now=drain_requested)

    assert wait_for(lambda: Node.objects.get(pk=node.pk).state == NodeState.DRAINED, timeout=60), (
        diagnostics(world)
    )
    for workload in on_node:
        run = Run.objects.filter(workload=workload).order_by("attempt").first()
        assert run.end_reason == RunEndReason.DRAINED
        # Evicted only once its own minimum runtime had passed.
        minimum = timedelta(seconds=workload.min_runtime_seconds)
        assert run.stop_requested_at - run.started_at >= minimum
    # Nothing new landed on the draining node.
    since = Run.objects.filter(cluster=world.cluster, started_at__gt=drain_requested)
    assert all(node_name not in r.placement for r in since)
