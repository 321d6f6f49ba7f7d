"""The simulated executor and the demo replay, against the real services and database."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db.models import Sum
from django.utils import timezone

from governance.models import Cluster, Project
from scheduler.choices import NodeState, OrderKind, OrderState, RunEndReason, WorkloadState
from scheduler.executors.demo import busy_start, demo_replay_step, demo_workloads, philly_jobs
from scheduler.executors.simulated import (
    simulated_clusters,
    simulated_executor_step,
    simulated_nodes_ensure,
    simulated_nodes_wake,
)
from scheduler.executors.tasks import simulated_executor_tick
from scheduler.models import Node, Order, Run, UsageRecord, Workload
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.runs import run_request_stop
from scheduler.services.workloads import workload_submit
from scheduler.simulator.traces import TraceJob
from tests.personas import build_personas

pytestmark = pytest.mark.django_db


@pytest.fixture
def personas(db, settings):
    """The personas' tree; its cluster (4 x 8 GPUs) is simulated at 60x, no warm start."""
    settings.SIMULATED_EXECUTOR_CLUSTERS = ["acme/h100"]
    settings.SIMULATED_EXECUTOR_SPEEDUP = 60
    settings.DEMO_REPLAY_WARM_START_JOBS = 0
    return build_personas()


def submit(personas, *, gpus=8, duration=600, min_runtime=0, resumable=True, name="job"):
    return workload_submit(
        project=personas.project_a1,
        cluster=personas.cluster,
        name=name,
        gpus=gpus,
        min_runtime_seconds=min_runtime,
        resumable=resumable,
        declared_duration_seconds=duration,
        launch_spec={"command": ["sleep", str(duration)]},
    )


def ledger(run: Run) -> Decimal:
    return UsageRecord.objects.filter(run=run).aggregate(s=Sum("gpu_seconds"))["s"] or Decimal(0)


def test_simulated_nodes_mirror_the_cluster_once(personas):
    nodes = simulated_nodes_ensure(cluster=personas.cluster)
    assert sorted(n.name for n in nodes) == [f"sim-h100-0{i}" for i in range(1, 5)]
    assert {n.gpus for n in nodes} == {8}
    assert {n.state for n in nodes} == {NodeState.HEALTHY}
    again = simulated_nodes_ensure(cluster=personas.cluster)
    assert len(again) == 4 and Node.objects.count() == 4
    assert simulated_clusters() == [personas.cluster]


def test_a_started_workload_finishes_after_its_duration_divided_by_the_speedup(personas):
    t0 = timezone.now()
    simulated_nodes_ensure(cluster=personas.cluster, now=t0)
    workload = submit(personas, duration=600)  # 10 min of work: 10 s at 60x
    scheduling_cycle_run(cluster_id=personas.cluster.pk, now=t0)
    (run,) = Run.objects.filter(workload=workload)

    step = simulated_executor_step(cluster=personas.cluster, now=t0 + timedelta(seconds=1))
    assert step.acknowledged == 1 and step.finished == 0
    assert Order.objects.get(run=run, kind=OrderKind.START).state == OrderState.ACKNOWLEDGED

    step = simulated_executor_step(cluster=personas.cluster, now=t0 + timedelta(seconds=9))
    assert step.finished == 0
    step = simulated_executor_step(cluster=personas.cluster, now=t0 + timedelta(seconds=10))
    assert step.finished == 1
    run.refresh_from_db()
    workload.refresh_from_db()
    assert workload.state == WorkloadState.SUCCEEDED
    assert run.end_reason == RunEndReason.SUCCEEDED
    assert run.ended_at - run.started_at == timedelta(seconds=10)
    assert ledger(run) == 8 * 10  # 8 GPUs x 10 s of wall time, charged exactly once
    # A later step finds nothing more to do.
    later = simulated_executor_step(cluster=personas.cluster, now=t0 + timedelta(seconds=20))
    assert (later.acknowledged, later.finished) == (0, 0)


def test_a_stop_order_ends_the_run_at_once_and_a_resumable_workload_keeps_its_work(personas):
    t0 = timezone.now()
    simulated_nodes_ensure(cluster=personas.cluster, now=t0)
    workload = submit(personas, duration=600)
    scheduling_cycle_run(cluster_id=personas.cluster.pk, now=t0)
    simulated_executor_step(cluster=personas.cluster, now=t0)
    (first,) = Run.objects.filter(workload=workload)

    # Preempted 4 s in (4 min of its 10 simulated minutes done).
    stop_at = t0 + timedelta(seconds=4)
    run_request_stop(run=first, reason=RunEndReason.PREEMPTED, now=stop_at)
    Workload.objects.filter(pk=workload.pk).update(state=WorkloadState.PREEMPTED)
    step = simulated_executor_step(cluster=personas.cluster, now=stop_at)
    assert step.acknowledged == 1
    first.refresh_from_db()
    workload.refresh_from_db()
    assert first.end_reason == RunEndReason.PREEMPTED
    assert workload.state == WorkloadState.PENDING

    restart = t0 + timedelta(seconds=30)
    scheduling_cycle_run(cluster_id=personas.cluster.pk, now=restart)
    second = Run.objects.get(workload=workload, attempt=2)
    simulated_executor_step(cluster=personas.cluster, now=restart)
    assert (
        simulated_executor_step(
            cluster=personas.cluster, now=restart + timedelta(seconds=5)
        ).finished
        == 0
    )
    # 6 s of wall time left (6 simulated minutes).
    done = simulated_executor_step(cluster=personas.cluster, now=restart + timedelta(seconds=6))
    assert done.finished == 1
    second.refresh_from_db()
    assert second.end_reason == RunEndReason.SUCCEEDED


def test_a_non_resumable_workload_starts_over(personas):
    t0 = timezone.now()
    simulated_nodes_ensure(cluster=personas.cluster, now=t0)
    workload = submit(personas, duration=600, resumable=False)
    scheduling_cycle_run(cluster_id=personas.cluster.pk, now=t0)
    simulated_executor_step(cluster=personas.cluster, now=t0)
    first = Run.objects.get(workload=workload)
    run_request_stop(run=first, reason=RunEndReason.PREEMPTED, now=t0 + timedelta(seconds=8))
    Workload.objects.filter(pk=workload.pk).update(state=WorkloadState.PREEMPTED)
    simulated_executor_step(cluster=personas.cluster, now=t0 + timedelta(seconds=8))
    restart = t0 + timedelta(seconds=20)
    scheduling_cycle_run(cluster_id=personas.cluster.pk, now=restart)
    simulated_executor_step(cluster=personas.cluster, now=restart)
    assert (
        simulated_executor_step(
            cluster=personas.cluster, now=restart + timedelta(seconds=9)
        ).finished
        == 0
    )
    assert (
        simulated_executor_step(
            cluster=personas.cluster, now=restart + timedelta(seconds=10)
        ).finished
        == 1
    )


def test_simulated_nodes_heartbeat_and_come_back_after_a_lapse(personas):
    t0 = timezone.now()
    nodes = simulated_nodes_ensure(cluster=personas.cluster, now=t0)
    from scheduler.services.nodes import nodes_expire_heartbeats

    expired = nodes_expire_heartbeats(now=t0 + timedelta(hours=1))
    assert len(expired) == len(nodes)
    simulated_executor_step(cluster=personas.cluster, now=t0 + timedelta(hours=1, seconds=1))
    assert set(Node.objects.values_list("state", flat=True)) == {NodeState.HEALTHY}


def test_a_restarted_server_wakes_its_simulated_nodes_before_any_heartbeat_check(personas):
    # The server was stopped for an hour with work running; at its start the nodes are woken
    # first, so the heartbeat check finds nothing silent and the run keeps going.
    t0 = timezone.now() - timedelta(hours=1)
    simulated_nodes_ensure(cluster=personas.cluster, now=t0)
    workload = submit(personas, duration=10 * 3600)
    scheduling_cycle_run(cluster_id=personas.cluster.id, now=t0)
    from scheduler.services.nodes import nodes_expire_heartbeats

    assert simulated_nodes_wake() == personas.cluster.nodes
    assert nodes_expire_heartbeats() == []
    assert Run.objects.get(workload=workload).ended_at is None


# --- demo replay ----------------------------------------------------------------------------


def job(line: int, t: float, *, gpus: int = 1, duration: float = 3600, vc: str = "detection"):
    return TraceJob(
        id=str(line), submit_time=t, duration=duration, gpus=gpus, project=vc, line=line
    )


def test_replay_submits_due_jobs_in_accelerated_time(personas):
    jobs = (
        job(2, 0.0, gpus=1, duration=600),
        job(3, 60.0, gpus=16, duration=7200),  # a 2-node gang
        job(4, 120.0, vc="unknown-vc"),  # no such project: skipped
        job(5, 180.0, gpus=12),  # rounded up to whole nodes
        job(6, 6000.0),
    )
    t0 = timezone.now()
    cluster = personas.cluster
    assert demo_replay_step(cluster=cluster, now=t0, jobs=jobs) == 1
    first = demo_workloads(cluster).get()
    assert first.project == personas.project_a1
    assert first.min_runtime_seconds == 0  # the first of every ten goes to the free lane
    assert first.declared_duration_seconds == 600
    # 60 s of trace = 1 s at 60x; nothing more is due before then.
    assert demo_replay_step(cluster=cluster, now=t0 + timedelta(seconds=0.5), jobs=jobs) == 0
    assert demo_replay_step(cluster=cluster, now=t0 + timedelta(seconds=3), jobs=jobs) == 2
    gang, twelve = demo_workloads(cluster).order_by("id")[1:]
    assert (gang.gpus, gang.nodes) == (16, 2)
    assert gang.min_runtime_seconds == 120  # the 2 h contract, scaled like the clock
    assert (twelve.gpus, twelve.nodes) == (16, 2)
    # The last job is due at 100 s; the replay resumes from the workloads' launch specs.
    assert demo_replay_step(cluster=cluster, now=t0 + timedelta(seconds=99), jobs=jobs) == 0
    assert demo_replay_step(cluster=cluster, now=t0 + timedelta(seconds=101), jobs=jobs) == 1
    assert demo_replay_step(cluster=cluster, now=t0 + timedelta(hours=1), jobs=jobs) == 0
    assert demo_workloads(cluster).count() == 4


def test_replay_waits_while_the_queue_is_long_and_resumes_from_now_after_a_stop(personas):
    jobs = tuple(job(i + 2, i * 60.0) for i in range(10))
    t0 = timezone.now()
    cluster = personas.cluster
    assert demo_replay_step(cluster=cluster, now=t0, jobs=jobs) == 1  # the replay starts now
    assert demo_replay_step(cluster=cluster, now=t0 + timedelta(seconds=5), jobs=jobs) == 5
    assert (
        demo_replay_step(cluster=cluster, now=t0 + timedelta(seconds=9), jobs=jobs, max_pending=6)
        == 0
    )
    # A day later the replay does not flood the queue: it resumes with the next job now.
    later = t0 + timedelta(days=1)
    assert demo_replay_step(cluster=cluster, now=later, jobs=jobs) == 1
    assert demo_replay_step(cluster=cluster, now=later + timedelta(seconds=1), jobs=jobs) == 1


def test_replay_starts_where_the_trace_gets_busy_with_a_warm_start(personas, settings):
    settings.DEMO_REPLAY_WARM_START_JOBS = 3
    quiet = tuple(job(i + 2, i * 86400.0 * 3) for i in range(5))  # one job every 3 days
    busy = tuple(job(i + 7, quiet[-1].submit_time + 86400 + i * 60.0) for i in range(200))
    jobs = quiet + busy
    assert busy_start(jobs) == 5
    t0 = timezone.now()
    # The first busy job and the three after it are due at once; the quiet weeks are skipped.
    assert demo_replay_step(cluster=personas.cluster, now=t0, jobs=jobs) == 4
    lines = sorted(w.launch_spec["trace_line"] for w in demo_workloads(personas.cluster))
    assert lines == [7, 8, 9, 10]
    assert demo_replay_step(cluster=personas.cluster, now=t0 + timedelta(seconds=1), jobs=jobs) == 1


def test_the_demo_replays_the_bundled_trace_into_the_demo_organization(db, settings):
    settings.SIMULATED_EXECUTOR_CLUSTERS = ["philly/h100"]
    call_command("load_demo", verbosity=0)
    cluster = Cluster.objects.get(organization__slug="philly", slug="h100")
    jobs = philly_jobs()
    assert len(jobs) > 80_000
    result = simulated_executor_tick.apply().get()
    assert result["h100"]["submitted"] >= 1
    assert Node.objects.filter(cluster=cluster).count() == 32
    workload = demo_workloads(cluster).first()
    replayed = jobs[workload.launch_spec["trace_index"]]
    assert Project.objects.filter(pk=workload.project_id, slug=replayed.project).exists()
    assert workload.launch_spec["trace_index"] >= busy_start(jobs)
