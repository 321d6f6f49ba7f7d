"""The demo's past: days of the Philly trace replayed by the engine into the real ledger."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db.models import Max

from governance.choices import AuditAction, Role
from governance.models import AuditEvent, Cluster, CostRate, Project, RoleAssignment
from governance.selectors.health import cluster_health
from governance.selectors.visibility import user_visibility
from scheduler.choices import NodeState, RunEndReason, WorkloadState
from scheduler.executors.demo import _shape, demo_replay_step, philly_jobs
from scheduler.executors.demo_history import TARGET_DEMAND, demo_history_build, history_window
from scheduler.models import EntitlementRecord, Node, Run, RunNode, Workload
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.nodes import nodes_expire_heartbeats
from scheduler.simulator.traces import TraceJob
from tests.scheduler.conftest import ledger_total, runs_total

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)


@pytest.fixture
def demo(settings):
    settings.SIMULATED_EXECUTOR_SPEEDUP = 1
    call_command("load_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    cluster = Cluster.objects.get(organization__slug="philly", slug="h100")
    report = demo_history_build(cluster=cluster, days=2, now=NOW)
    return cluster, report


def test_the_history_is_charged_to_the_ledger_exactly_as_its_runs_ran(demo):
    cluster, report = demo
    assert report.workloads > 0 and report.runs >= report.workloads - report.pending
    assert report.start == NOW - timedelta(days=2)
    assert ledger_total(cluster) == runs_total(cluster, now=NOW)
    # Entitlement covers the same seconds, from the first run to now.
    span = EntitlementRecord.objects.filter(cluster=cluster).aggregate(until=Max("interval_end"))
    assert span["until"] == NOW
    assert CostRate.objects.filter(gpu_type=cluster.gpu_type).exists()


def test_what_runs_at_the_end_is_running_on_nodes_that_hold_it(demo):
    cluster, report = demo
    open_runs = Run.objects.filter(cluster=cluster, ended_at__isnull=True)
    assert open_runs.count() == report.running > 0
    assert set(open_runs.values_list("workload__state", flat=True)) == {WorkloadState.RUNNING}
    used: dict[int, int] = defaultdict(int)
    for node_id, gpus in RunNode.objects.filter(run__in=open_runs).values_list("node", "gpus"):
        used[node_id] += gpus
    assert max(used.values()) <= cluster.gpus_per_node
    # Every preemption names the workload it made room for, and that one started then.
    for run in Run.objects.filter(end_reason=RunEndReason.PREEMPTED, preempted_by__isnull=False)[
        :50
    ]:
        assert run.preempted_by.runs.filter(started_at=run.ended_at).exists()
    # Each charged run carries the engine's protection: at least its start plus its minimum
    # runtime (more for a workload preempted before); the free lane carries none.
    for run in Run.objects.filter(cluster=cluster).select_related("workload")[:500]:
        minimum = run.workload.min_runtime_seconds
        if minimum == 0:
            assert run.protected_until is None
        else:
            assert run.protected_until >= run.started_at + timedelta(seconds=minimum)
    # Nothing pending has an open run; nothing finished after now.
    assert not Workload.objects.filter(state=WorkloadState.PENDING, runs__ended_at=None).exists()
    assert not Workload.objects.filter(finished_at__gt=NOW).exists()


def test_the_live_loop_and_the_demo_replay_carry_on_from_it(demo):
    cluster, _ = demo
    last = Workload.objects.filter(cluster=cluster).order_by("-id").first()
    # The engine takes the stored state as its own (a bad placement would raise here).
    scheduling_cycle_run(cluster_id=cluster.id, now=NOW + timedelta(seconds=1))
    # The next job of the trace is due on the history's clock: the trace's own gaps.
    jobs = philly_jobs()
    index = last.launch_spec["trace_index"]
    projects = set(Project.objects.values_list("slug", flat=True))
    nxt = next(
        k
        for k in range(index + 1, len(jobs))
        if jobs[k].project in projects and _shape(jobs[k], cluster) is not None
    )
    due = last.submitted_at + timedelta(seconds=jobs[nxt].submit_time - jobs[index].submit_time)
    assert due > NOW
    early = demo_replay_step(cluster=cluster, now=due - timedelta(seconds=1), max_pending=10**6)
    on_time = demo_replay_step(cluster=cluster, now=due, max_pending=10**6)
    assert early == 0 and on_time >= 1
    new = Workload.objects.filter(cluster=cluster, id__gt=last.id).order_by("id").first()
    assert new.launch_spec["trace_index"] == nxt
    assert new.submitted_at == due


def test_the_nodes_are_alive_at_the_end_of_their_history(demo):
    # Registered when the history began, they heartbeat until now: the first heartbeat check
    # of the live loop used to mark all of them down and end everything running.
    cluster, report = demo
    assert nodes_expire_heartbeats(now=NOW + timedelta(seconds=5)) == []
    assert Run.objects.filter(cluster=cluster, ended_at__isnull=True).count() == report.running
    assert not Node.objects.filter(cluster=cluster).exclude(state=NodeState.HEALTHY).exists()


def test_a_cluster_with_a_past_is_never_given_another(demo):
    cluster, _ = demo
    before = Workload.objects.count()
    assert demo_history_build(cluster=cluster, days=2, now=NOW + timedelta(days=1)) is None
    assert Workload.objects.count() == before


def test_the_health_page_measures_the_history(demo):
    cluster, _ = demo
    admin = RoleAssignment.objects.get(organization=cluster.organization, role=Role.ORG_ADMIN).user
    health = cluster_health(
        visibility=user_visibility(user=admin),
        cluster=cluster,
        start=NOW - timedelta(days=2),
        end=NOW,
        now=NOW,
    )
    measured = [d for d in health.days if d.availability is not None]
    assert measured
    for day in measured:
        assert day.availability == 1  # no node left service in the replay
        assert 0 < day.occupancy <= 1


def job(t: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(id=f"j{t}", submit_time=t, duration=duration, gpus=gpus, project="p")


def test_the_window_is_the_one_whose_demand_is_nearest_the_target():
    # 8 GPUs, 2-day windows starting on whole days: [0, 2) asks 0.5x (job 1), [1, 3) and
    # [2, 4) ask 1.1x (job 2 only): the earliest of the closest wins; [3, 5) asks 2x (job 3).
    day = 86400.0
    jobs = (
        job(0, 4, 2 * day),
        job(2 * day, 8, 2 * day * TARGET_DEMAND),
        job(4 * day, 16, 2 * day),
        job(9 * day, 1, 60),
    )
    assert history_window(jobs, gpus=8, days=2) == (1 * day, 3 * day)


def test_load_demo_with_history_leaves_an_operator_drain_and_a_forced_preemption(settings):
    settings.SIMULATED_EXECUTOR_SPEEDUP = 1
    call_command("load_demo", "--history-days", "2", stdout=open("/dev/null", "w"))  # noqa: SIM115
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {AuditAction.NODE_DRAIN, AuditAction.RUN_PREEMPT_FORCED} <= actions
    assert Node.objects.filter(state=NodeState.DRAINING).count() == 1
    forced = Run.objects.get(stop_reason=RunEndReason.PREEMPTED, preempted_by__isnull=True,
                             stop_requested_at__isnull=False, ended_at__isnull=True)  # fmt: skip
    assert forced.workload.state == WorkloadState.PREEMPTED
