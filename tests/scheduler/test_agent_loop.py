"""The local agent's loop against a live server: real HTTP, real processes, real cycles.

Cycles run eagerly in the server's request threads here (no Celery worker), so a submit, an
exit or a stop acknowledgement is followed by a real scheduling cycle at once. The end-to-end
test with a worker and agent subprocesses is ``test_e2e_agents.py``.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from governance.celery import app as celery_app
from scheduler.agent.client import AgentClient, TransientError
from scheduler.agent.loop import Agent
from scheduler.agent.runner import ProcessRunner
from scheduler.choices import OrderKind, RunEndReason, WorkloadState
from scheduler.models import Node, Order, Run, UsageRecord, Workload
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.executor_reports import node_agent_create
from scheduler.services.workloads import workload_cancel, workload_submit
from tests.conftest import wait_for
from tests.personas import build_personas

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def eager_cycles():
    """Run Celery tasks (the cycles services enqueue) in-process, in the server's threads."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def world(eager_cycles, settings):
    settings.SCHEDULER_STOP_GRACE_SECONDS = 1
    return build_personas()


class AgentThread:
    """A real agent (HTTP client + process runner) running its loop in a thread."""

    def __init__(self, server: str, token: str, node: str, tmp_path, client_class=AgentClient):
        self.runner = ProcessRunner(
            gpus=[str(i) for i in range(8)], node=node, log_dir=tmp_path / node, grace_seconds=5
        )
        self.agent = Agent(
            client_class(server, token), self.runner, node=node, poll_seconds=0.1,
            heartbeat_seconds=1, backoff_max_seconds=0.5,
        )  # fmt: skip
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self.agent.run_forever, args=(self.stop,), kwargs={"shutdown_grace": 1}
        )
        self.thread.start()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=30)


@pytest.fixture
def start_agent(live_server, world, tmp_path):
    agents = []

    def start(name="node-1", client_class=AgentClient, token=None):
        if token is None:
            _, token = node_agent_create(cluster=world.cluster, name=name)
        agent = AgentThread(live_server.url, token, name, tmp_path, client_class)
        agents.append(agent)
        assert wait_for(lambda: Node.objects.filter(name=name).exists(), timeout=20)
        return agent

    yield start
    for agent in agents:
        agent.close()


def submit(world, command, *, gpus=2, min_runtime=0, name="job") -> Workload:
    return workload_submit(
        project=world.project_a1,
        cluster=world.cluster,
        name=name,
        gpus=gpus,
        min_runtime_seconds=min_runtime,
        launch_spec={"command": command},
    )


def state_of(workload: Workload) -> str:
    return Workload.objects.get(pk=workload.pk).state


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def ledger_equals_runs(workload: Workload) -> bool:
    """Σ ledger = Σ GPUs x run time, over every ended run of the workload."""
    runs = list(Run.objects.filter(workload=workload))
    expected = sum(
        (r.gpus * Decimal((r.ended_at - r.started_at) / timedelta(microseconds=1)) / 10**6)
        for r in runs
    )
    charged = UsageRecord.objects.filter(run__workload=workload).aggregate(s=Sum("gpu_seconds"))
    return all(r.ended_at for r in runs) and charged["s"] == expected


def test_a_workload_runs_on_its_gpus_and_its_exit_is_reported(world, start_agent, tmp_path):
    start_agent()
    out = tmp_path / "cuda.txt"
    workload = submit(world, f'echo "$CUDA_VISIBLE_DEVICES $GOVERNANCE_WORKLOAD_ID" > {out}')
    assert wait_for(lambda: state_of(workload) == WorkloadState.SUCCEEDED, timeout=30)
    assert out.read_text().split() == ["0,1", str(workload.pk)]
    run = Run.objects.get(workload=workload)
    assert run.end_reason == RunEndReason.SUCCEEDED and run.exit_code == 0
    assert ledger_equals_runs(workload)


def test_a_failing_command_fails_the_workload_with_its_exit_code(world, start_agent):
    start_agent()
    workload = submit(world, "exit 7")
    assert wait_for(lambda: state_of(workload) == WorkloadState.FAILED, timeout=30)
    assert Workload.objects.get(pk=workload.pk).exit_code == 7


def test_cancel_stops_the_process_and_the_run_ends_when_the_agent_confirms(
    world, start_agent, tmp_path
):
    agent = start_agent()
    pidfile = tmp_path / "pid"
    workload = submit(world, f"echo $$ > {pidfile}; exec sleep 60")
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=30)
    pid = int(pidfile.read_text())
    workload_cancel(workload=workload)
    assert wait_for(lambda: Run.objects.get(workload=workload).ended_at is not None, timeout=30)
    assert not agent.runner.running_keys()
    assert not process_alive(pid)
    run = Run.objects.get(workload=workload)
    assert run.end_reason == RunEndReason.CANCELLED
    assert state_of(workload) == WorkloadState.CANCELLED
    assert ledger_equals_runs(workload)


def test_a_process_ignoring_sigterm_is_killed_after_the_orders_grace(world, start_agent, tmp_path):
    start_agent()
    ready = tmp_path / "ready"
    script = tmp_path / "stubborn.sh"
    script.write_text(f"trap '' TERM\necho up > {ready}\nwhile true; do sleep 0.1; done\n")
    workload = submit(world, ["/bin/sh", str(script)])
    assert wait_for(ready.exists, timeout=30)
    cancelled_at = time.monotonic()
    workload_cancel(workload=workload)
    assert wait_for(lambda: Run.objects.get(workload=workload).ended_at is not None, timeout=30)
    # The stop order's grace (SCHEDULER_STOP_GRACE_SECONDS = 1 s) passed before SIGKILL; the
    # run stayed open, and charged, until the process was gone.
    assert time.monotonic() - cancelled_at >= 1
    run = Run.objects.get(workload=workload)
    assert (run.ended_at - run.stop_requested_at) >= timedelta(seconds=1)
    assert ledger_equals_runs(workload)


class LosesFirstAcks(AgentClient):
    """A client whose first two acknowledgements never reach the server (a lost response)."""

    lost = 0

    def acknowledge(self, order_id, **kwargs):
        if LosesFirstAcks.lost < 2:
            LosesFirstAcks.lost += 1
            raise TransientError("connection reset")
        return super().acknowledge(order_id, **kwargs)


def test_a_lost_acknowledgement_is_sent_again_and_nothing_runs_twice(world, start_agent, tmp_path):
    start_agent(client_class=LosesFirstAcks)
    starts = tmp_path / "starts"
    workload = submit(world, f"echo started >> {starts}; sleep 1")
    assert wait_for(lambda: state_of(workload) == WorkloadState.SUCCEEDED, timeout=30)
    start = Order.objects.get(run__workload=workload, kind=OrderKind.START)
    assert start.state == "acknowledged"
    assert starts.read_text().split() == ["started"]
    assert Run.objects.filter(workload=workload).count() == 1
    assert ledger_equals_runs(workload)


def test_the_same_order_delivered_twice_is_carried_out_once(world, start_agent, tmp_path):
    """A preemptor's start waits for its victim to leave; meanwhile it is delivered again at
    every poll, and started once."""
    start_agent()
    ready, starts, stopped = tmp_path / "ready", tmp_path / "starts", tmp_path / "stopped"
    # The free-lane victim takes 0.6 s to checkpoint after SIGTERM (the grace is 1 s).
    victim_script = tmp_path / "victim.sh"
    victim_script.write_text(
        f"trap 'sleep 0.6; date +%s.%N > {stopped}; exit 0' TERM\n"
        f"echo up > {ready}\nwhile true; do sleep 0.1; done\n"
    )
    victim = submit(world, ["/bin/sh", str(victim_script)], gpus=8, min_runtime=0)
    assert wait_for(ready.exists, timeout=30)
    preemptor = submit(world, f"date +%s.%N >> {starts}; sleep 1", gpus=8, min_runtime=60)
    assert wait_for(lambda: state_of(preemptor) == WorkloadState.SUCCEEDED, timeout=40)
    start = Order.objects.get(run__workload=preemptor, kind=OrderKind.START)
    assert start.delivery_count >= 2
    (started_at,) = starts.read_text().split()  # started once
    assert Run.objects.filter(workload=preemptor).count() == 1
    # Its process started only once the victim's had checkpointed and gone.
    assert float(stopped.read_text()) <= float(started_at)
    victim_run = Run.objects.filter(workload=victim).order_by("attempt").first()
    assert victim_run.end_reason == RunEndReason.PREEMPTED


def test_a_restarted_agent_reports_what_it_lost_and_the_work_is_requeued(
    world, start_agent, tmp_path
):
    _, token = node_agent_create(cluster=world.cluster, name="node-1")
    first = start_agent(token=token)
    runs = tmp_path / "runs"
    workload = submit(world, f"echo $GOVERNANCE_RUN_ID >> {runs}; sleep 3", min_runtime=0)
    assert wait_for(lambda: runs.exists(), timeout=30)
    # The agent dies without a word (its process goes with it) ...
    first.agent.client = AgentClient("http://127.0.0.1:9", token)
    first.runner.stop_all(grace_seconds=0)
    first.close()
    assert Run.objects.get(workload=workload).ended_at is None  # the server does not know yet
    # ... and comes back: it reports the run it lost, which is requeued and runs again.
    start_agent(token=token)
    assert wait_for(lambda: state_of(workload) == WorkloadState.SUCCEEDED, timeout=40)
    first_run, second_run = Run.objects.filter(workload=workload).order_by("attempt")
    assert first_run.end_reason == RunEndReason.PREEMPTED
    assert second_run.end_reason == RunEndReason.SUCCEEDED
    assert runs.read_text().split() == [str(first_run.pk), str(second_run.pk)]
    assert ledger_equals_runs(workload)


def test_the_agent_rides_out_a_server_outage(world, start_agent, tmp_path):
    """While the server is unreachable the process runs on and its exit waits; once the
    server answers again the exit is delivered (the agent backs off meanwhile)."""
    agent = start_agent()
    ready = tmp_path / "ready"
    workload = submit(world, f"echo up > {ready}; sleep 1.5")
    assert wait_for(ready.exists, timeout=30)
    server = agent.agent.client.server
    agent.agent.client.server = "http://127.0.0.1:9"  # nothing listens: connection refused
    assert wait_for(lambda: agent.agent._exits, timeout=10)  # ended, waiting to be reported
    assert state_of(workload) == WorkloadState.RUNNING
    assert agent.agent._backoff > 0
    agent.agent.client.server = server
    assert wait_for(lambda: state_of(workload) == WorkloadState.SUCCEEDED, timeout=30)
    assert ledger_equals_runs(workload)


def cycle_until(world, rows) -> bool:
    """True once ``rows()`` has a row; otherwise run a cycle (as the beat would) first."""
    if rows().exists():
        return True
    scheduling_cycle_run(cluster_id=world.cluster.id)
    return rows().exists()


class HeldFetches(AgentClient):
    """Fetches return nothing while ``hold`` is set, so orders pile up on the server: what an
    agent sees when two cycles start and then preempt a run between two of its polls."""

    hold = threading.Event()

    def fetch_orders(self):
        if HeldFetches.hold.is_set():
            return []
        return super().fetch_orders()


def test_a_run_stopped_before_the_agent_fetched_its_start_is_never_started(
    world, start_agent, tmp_path
):
    """Found by ``make load``: the stop was acknowledged ("was not running"), which ended the
    run, then its start was carried out anyway; the process held the GPUs the cycle had given
    the preemptor, whose start failed, and ran work the server had requeued."""
    runs = tmp_path / "runs"
    HeldFetches.hold.set()
    try:
        start_agent(client_class=HeldFetches)
        victim = submit(
            world, f'echo "$GOVERNANCE_RUN_ID" >> {runs}; sleep 1', gpus=8, min_runtime=0,
            name="victim",
        )  # fmt: skip
        assert wait_for(lambda: cycle_until(world, lambda: Run.objects.filter(workload=victim)))
        first = Run.objects.get(workload=victim)
        preemptor = submit(world, "sleep 1", gpus=8, min_runtime=60, name="preemptor")
        # Both cycles ran before the agent saw anything: one fetch will carry the victim's
        # stop, the victim's start and the preemptor's start. (A submit's own cycle skips
        # when a cycle of the server's threads holds the lock: run one as the beat would.)
        assert wait_for(
            lambda: cycle_until(
                world, lambda: Order.objects.filter(run__workload=preemptor, kind=OrderKind.START)
            )
        )
        assert Order.objects.filter(run=first, kind=OrderKind.STOP).exists()
    finally:
        HeldFetches.hold.clear()

    assert wait_for(lambda: state_of(preemptor) == WorkloadState.SUCCEEDED, timeout=30)
    first.refresh_from_db()
    assert first.end_reason == RunEndReason.PREEMPTED
    assert str(first.pk) not in (runs.read_text().split() if runs.exists() else [])
    # The requeued victim runs afterwards, once, as a new run.
    assert wait_for(lambda: state_of(victim) == WorkloadState.SUCCEEDED, timeout=30)
    assert runs.read_text().split() == [
        str(r.pk) for r in Run.objects.filter(workload=victim, attempt__gt=first.attempt)
    ]
