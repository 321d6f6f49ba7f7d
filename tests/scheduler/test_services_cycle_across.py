"""Scheduling cycles against the database, across cycles: what one cycle decides and the
next reads back (held nodes, protection after a preemption, patience, loans of held GPUs,
the order of debug jobs, work swapped out by its own team)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.choices import RunEndReason, RunLane, WorkloadState
from scheduler.models import Run, RunNode
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.cycle_state import cycle_scheduler_build, cycle_state_read
from tests.scheduler.conftest import build_world
from tests.scheduler.test_services_cycle import T0, submit

pytestmark = pytest.mark.django_db


def test_a_blocked_gang_holds_nodes_once_it_waited_its_bound_across_cycles(db):
    """The engine is rebuilt every cycle; how long a gang has waited blocked at the head of
    its project's turn must survive that, or it never reaches its 30-minute bound."""
    world = build_world(nodes=4)
    for _ in range(7):  # protected work for hours on every node; 4 GPUs free on node4
        submit(world, gpus=4, min_runtime=8 * 3600)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    gang = submit(world, gpus=16, nodes=2, min_runtime=3600, at=T0 + timedelta(minutes=1))

    first = T0 + timedelta(minutes=2)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=first)
    gang.refresh_from_db()
    assert gang.state == WorkloadState.PENDING
    assert gang.blocked_since == first
    assert "holding" not in gang.reason

    scheduling_cycle_run(cluster_id=world.cluster.id, now=first + timedelta(minutes=20))
    scheduling_cycle_run(cluster_id=world.cluster.id, now=first + timedelta(minutes=31))
    gang.refresh_from_db()
    assert gang.blocked_since == first  # kept from the first cycle, not restarted
    # the emptiest node, then the first whose work is preemptible soonest
    assert "holding node1, node4 (2 of the 2 nodes it needs) until they free" in gang.reason


def preempted_once(world, workload) -> None:
    """A first run of ``workload`` (4 GPUs on node1) from T0, preempted after 15 minutes."""
    Run.objects.create(
        workload=workload, attempt=1, project=workload.project, cluster=world.cluster,
        gpus=4, lane=RunLane.CHARGED, placement={"node1": 4}, started_at=T0,
        ended_at=T0 + timedelta(minutes=15), end_reason=RunEndReason.PREEMPTED,
        accounted_until=T0 + timedelta(minutes=15),
    )  # fmt: skip


def test_a_workload_preempted_before_is_protected_longer_by_the_rebuilt_engine(world):
    """The churn budget: each earlier preemption doubles the next run's protection."""
    workload = submit(world, gpus=4, min_runtime=600)
    preempted_once(world, workload)
    again = T0 + timedelta(minutes=20)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=again)
    workload.refresh_from_db()
    assert workload.state == WorkloadState.RUNNING

    later = again + timedelta(minutes=1)
    sched, _, _ = cycle_scheduler_build(
        world.cluster, cycle_state_read(world.cluster), later, "fairshare"
    )

    assert sched.running[str(workload.id)].protected_until == (again.timestamp() + 2 * 600)


def test_the_run_records_the_engines_protection_and_every_page_shows_it(world, client):
    """A workload preempted once is protected twice its minimum runtime on its next run
    (the churn budget). The cycle records that end on the run; the queue, the workload's
    page, the node's page and the API show it, not the start plus the bare minimum."""
    from django.utils import dateformat, timezone

    from tests.factories import org_admin_of

    workload = submit(world, gpus=4, min_runtime=600)
    preempted_once(world, workload)
    first_only = submit(world, gpus=2, min_runtime=600)
    again = T0 + timedelta(minutes=20)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=again)

    run = Run.objects.get(workload=workload, attempt=2)
    assert run.protected_until == again + timedelta(seconds=2 * 600)
    fresh = Run.objects.get(workload=first_only)
    assert fresh.protected_until == again + timedelta(seconds=600)

    admin = org_admin_of(world.cluster.organization).user
    client.force_login(admin)
    shown = dateformat.format(timezone.localtime(run.protected_until), "D j M, H:i")
    page = client.get(f"/workloads/{workload.id}/").content.decode()
    # (T0 is in the past: the page reads that the protection is over, and since when)
    assert f"Past its minimum runtime since <strong>{shown}" in page
    body = client.get(f"/api/workloads/{workload.id}/").json()
    (latest,) = [r for r in body["runs"] if r["attempt"] == 2]
    assert latest["protected_until"].replace("Z", "+00:00") == run.protected_until.isoformat()
    from governance.selectors.visibility import user_visibility
    from scheduler.selectors.node_map import node_with_work

    node = RunNode.objects.get(run=run).node
    (work,) = [w for w in node_with_work(node=node, vis=user_visibility(user=admin)).work
               if w.workload_id == workload.id]  # fmt: skip
    assert work.protected_until == run.protected_until
    # A drain does not wait for the churn budget: it evicts once the minimum has passed.
    assert work.drain_due == again + timedelta(seconds=600)


def test_a_workload_waiting_out_its_patience_keeps_its_deadline_across_cycles(db):
    """Break-even patience: a reclaim waits until the wait has cost what the eviction loses.
    The engine is rebuilt every cycle; the deadline it found must survive that, or a later
    cycle (the victim just past a checkpoint, so cheaper to evict) decides what the kept
    engine of the simulator would not."""
    world = build_world(nodes=1)
    victim = submit(world, "unbudgeted", gpus=8, min_runtime=600)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    waiting_since = T0 + timedelta(minutes=25)
    owed = submit(world, gpus=8, min_runtime=7200, at=waiting_since)

    # The victim ran 25 minutes: evicting it loses 25 + 5 (restart) minutes on 8 GPUs, so
    # the budgeted workload waits 30 minutes from when it became pending.
    scheduling_cycle_run(cluster_id=world.cluster.id, now=waiting_since)
    owed.refresh_from_db()
    assert owed.state == WorkloadState.PENDING
    assert owed.patient_until == waiting_since + timedelta(minutes=30)
    assert "may preempt in 30 min if no GPUs free first" in owed.reason

    # Just past the victim's checkpoint an eviction would lose only 6 minutes, but the
    # deadline stands.
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(minutes=31))
    owed.refresh_from_db()
    victim.refresh_from_db()
    assert (owed.state, victim.state) == (WorkloadState.PENDING, WorkloadState.RUNNING)
    assert owed.patient_until == waiting_since + timedelta(minutes=30)
    assert "may preempt in 24 min if no GPUs free first" in owed.reason

    scheduling_cycle_run(cluster_id=world.cluster.id, now=waiting_since + timedelta(minutes=30))
    owed.refresh_from_db()
    victim.refresh_from_db()
    assert (owed.state, victim.state) == (WorkloadState.RUNNING, WorkloadState.PREEMPTED)
    assert owed.patient_until is None


def test_a_run_that_borrows_a_held_node_is_recorded_and_recalled_by_a_later_cycle(db):
    """Short work may borrow the free GPUs of a node held for a blocked workload and yields
    to it once past its protection. The engine is rebuilt every cycle: the loan is kept on
    the run, or the holder would wait behind its borrower like behind anyone else."""
    from scheduler.choices import ExitOutcome
    from scheduler.services.executor_reports import run_report_exit

    world = build_world(shares={"alpha": "70", "beta": "30"})
    # One node gets beta's 6 GPUs, the other alpha's 4. Both protected for 8 h.
    beta_fill = submit(world, "beta", gpus=6, min_runtime=8 * 3600)
    alpha_fill = submit(world, "alpha", gpus=4, min_runtime=8 * 3600)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    ((beta_node, _),) = Run.objects.get(workload=beta_fill).placement.items()
    ((alpha_node, _),) = Run.objects.get(workload=alpha_fill).placement.items()
    assert beta_node != alpha_node
    # alpha's 6-GPU job fits nowhere and keeps alpha within its entitlement (4 + 6 of 11.2):
    # it holds the node with 4 free GPUs.
    big = submit(world, "alpha", gpus=6, min_runtime=3600, at=T0 + timedelta(minutes=1))
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(minutes=1))
    big.refresh_from_db()
    assert f"holding {alpha_node}" in big.reason
    # beta's 4-GPU debug job (15 min minimum) borrows node2's free GPUs.
    probe = submit(world, "beta", gpus=4, min_runtime=900, at=T0 + timedelta(minutes=1))
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(minutes=2))
    loan = Run.objects.get(workload=probe)
    assert loan.placement == {alpha_node: 4}
    assert loan.loan_for_id == big.id
    assert "held for" in loan.start_reason

    run_report_exit(
        run=Run.objects.get(workload=alpha_fill), outcome=ExitOutcome.SUCCEEDED, exit_code=0,
        now=T0 + timedelta(minutes=10),
    )  # fmt: skip
    # Until probe's 15 minutes are over nothing moves; then big takes node2 back.
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(minutes=16))
    probe.refresh_from_db()
    assert probe.state == WorkloadState.RUNNING
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(minutes=17))
    probe.refresh_from_db()
    big.refresh_from_db()
    assert probe.state == WorkloadState.PREEMPTED
    assert big.state == WorkloadState.RUNNING
    loan.refresh_from_db()
    assert loan.preempted_by_id == big.id
    assert f"borrowed GPUs held for {big.id}" in loan.stop_explanation


def test_a_colleagues_lone_debug_job_starts_before_the_rest_of_a_sweep(db):
    """Debug-class work is ranked in its submitter's burst at submit, and the cycle orders
    a project's work by it: one person's sweep does not queue another's debug job."""
    from scheduler.services.workloads import workload_submit_many
    from tests.factories import UserFactory

    world = build_world(nodes=1, gpus_per_node=2, shares={"budgeted": "100"})
    sam, kim = UserFactory(), UserFactory()
    project, cluster = world.projects["budgeted"], world.cluster
    item = {"project": project, "cluster": cluster, "gpus": 1, "min_runtime_seconds": 900,
            "launch_spec": {"command": ["python", "probe.py"]}}  # fmt: skip
    sweep = workload_submit_many(
        items=[{**item, "name": f"sweep-{i}"} for i in range(4)], submitted_by=sam, now=T0
    )
    later = submit(world, "budgeted", gpus=1, min_runtime=900, at=T0 + timedelta(seconds=5),
                   submitted_by=sam)  # fmt: skip
    lone = submit(world, "budgeted", gpus=1, min_runtime=900, at=T0 + timedelta(seconds=10),
                  submitted_by=kim)  # fmt: skip
    training = submit(world, "budgeted", gpus=1, min_runtime=7200, at=T0, submitted_by=sam)
    for w in (*sweep, later, lone, training):
        w.refresh_from_db()
    assert [w.burst_rank for w in sweep] == [0, 1, 2, 3]
    assert (later.burst_rank, lone.burst_rank, training.burst_rank) == (4, 0, 0)

    scheduling_cycle_run(cluster_id=cluster.id, now=T0 + timedelta(seconds=20))

    started = set(Run.objects.filter(cluster=cluster).values_list("workload_id", flat=True))
    assert started == {sweep[0].id, lone.id}


def test_a_run_swapped_out_by_its_own_teams_work_counts_as_the_teams_while_that_work_runs(db):
    """A team's debug job that evicts the team's own training run (a swap) must not give the
    team a claim on other teams' GPUs, or the run could take back what another team had
    reclaimed (ping-pong). The engine is rebuilt every cycle: the swap is read back from the
    run's ``preempted_by``, and ends when the debug job does."""
    from scheduler.choices import ExitOutcome
    from scheduler.services.executor_reports import run_report_exit

    world = build_world(shares={"alpha": "50", "beta": "50"})  # 8 GPUs each of 16
    submit(world, "alpha", gpus=4, min_runtime=8 * 3600)
    training = submit(world, "alpha", gpus=4, min_runtime=3600)
    for _ in range(2):
        submit(world, "beta", gpus=4, min_runtime=8 * 3600)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    assert Run.objects.filter(ended_at__isnull=True).count() == 4  # full; each team at 8

    # alpha runs its entitlement: its debug job may not reclaim, so it swaps out alpha's
    # training run (past its minimum) once its patience (its own 10 minutes) is over.
    debug = submit(world, "alpha", gpus=1, min_runtime=600, at=T0 + timedelta(minutes=61))
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(minutes=72))
    training_run = Run.objects.get(workload=training)
    assert training_run.preempted_by_id == debug.id

    def rebuilt(at):
        sched, _, _ = cycle_scheduler_build(
            world.cluster, cycle_state_read(world.cluster), at, "fairshare"
        )
        return sched

    # While the executor stops the run, the workload is neither pending nor running: the
    # swap counts all the same.
    alpha = rebuilt(T0 + timedelta(minutes=72, seconds=30)).running[str(debug.id)]
    assert rebuilt(T0 + timedelta(minutes=72, seconds=30)).swapped_gpus() == {
        alpha.workload.project: 4
    }
    run_report_exit(run=training_run, outcome=ExitOutcome.PREEMPTED, now=T0 + timedelta(minutes=73))
    training.refresh_from_db()
    assert training.state == WorkloadState.PENDING
    assert rebuilt(T0 + timedelta(minutes=74)).swapped_gpus() == {alpha.workload.project: 4}

    run_report_exit(
        run=Run.objects.get(workload=debug), outcome=ExitOutcome.SUCCEEDED,
        now=T0 + timedelta(minutes=80),
    )  # fmt: skip
    assert rebuilt(T0 + timedelta(minutes=81)).swapped_gpus() == {}
