"""A scheduling cycle against the database: starts, orders, reasons, preemption, CAS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.choices import OrderKind, OrderState, RunEndReason, RunLane, WorkloadState
from scheduler.models import Order, Run, RunNode, SchedulingCycle, Workload
from scheduler.selectors.queue_positions import queue_positions
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.cycle_state import cycle_scheduler_build, cycle_state_read
from scheduler.services.runs import run_end
from scheduler.services.workloads import workload_cancel, workload_submit
from tests.scheduler.conftest import build_world

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def submit(world, project="budgeted", *, gpus=8, nodes=1, min_runtime=600, at=T0, **kw):
    return workload_submit(
        project=world.projects[project], cluster=world.cluster, name=f"job-{project}-{gpus}",
        gpus=gpus, nodes=nodes, min_runtime_seconds=min_runtime,
        launch_spec={"command": ["python", "train.py"]}, now=at, **kw,
    )  # fmt: skip


def test_cycle_starts_a_submitted_workload_with_a_run_and_a_start_order(world):
    workload = submit(world, gpus=4)

    cycle = scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=5))

    workload.refresh_from_db()
    assert workload.state == WorkloadState.RUNNING
    assert workload.first_started_at == T0 + timedelta(seconds=5)
    assert workload.queue_key is None
    run = Run.objects.get(workload=workload)
    assert run.attempt == 1
    assert run.lane == RunLane.CHARGED
    assert sum(run.placement.values()) == 4
    (run_node,) = RunNode.objects.filter(run=run)
    assert run_node.gpus == 4 and run_node.node.name in run.placement
    (order,) = Order.objects.filter(run=run)
    assert order.kind == OrderKind.START
    assert order.state == OrderState.CREATED
    assert order.node_id == run_node.node_id
    assert order.idempotency_key == f"start:{run.id}:{run_node.node_id}"
    assert order.payload["launch_spec"] == {"command": ["python", "train.py"]}
    assert order.payload["gpus"] == 4
    assert cycle.starts == 1 and cycle.orders == 1 and cycle.pending == 1


def test_a_gang_gets_one_start_order_per_whole_node(world):
    workload = submit(world, gpus=16, nodes=2)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)

    run = Run.objects.get(workload=workload)
    assert run.placement == {"node1": 8, "node2": 8}
    orders = Order.objects.filter(run=run, kind=OrderKind.START)
    assert sorted(o.node.name for o in orders) == ["node1", "node2"]
    assert all(o.payload["gang_nodes"] == ["node1", "node2"] for o in orders)


def test_free_lane_run_is_marked_free(world):
    workload = submit(world, "unbudgeted", gpus=2, min_runtime=0)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)

    assert Run.objects.get(workload=workload).lane == RunLane.FREE


def test_pending_workloads_get_a_reason_and_a_queue_position(world):
    for _ in range(2):
        submit(world, gpus=8)
    waiting_first = submit(world, gpus=8, at=T0 + timedelta(seconds=1))
    waiting_second = submit(world, "unbudgeted", gpus=8, at=T0 + timedelta(seconds=2))

    cycle = scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=10))

    waiting_first.refresh_from_db()
    waiting_second.refresh_from_db()
    assert waiting_first.state == waiting_second.state == WorkloadState.PENDING
    positions = queue_positions([waiting_first, waiting_second])
    assert positions == {waiting_first.id: 1, waiting_second.id: 2}
    assert "waiting for 8 GPUs" in waiting_first.engine_reason
    assert "no budget share" in waiting_second.engine_reason
    assert sum(cycle.reasons_summary.values()) == 2


def test_workloads_move_up_without_their_queue_keys_being_rewritten(world):
    """When the work ahead starts, the ones behind move up: their positions are counted
    from keys that stay as they were, so a cycle does not rewrite every pending row."""
    running = [submit(world, gpus=8) for _ in range(2)]
    waiting = [submit(world, gpus=4, at=T0 + timedelta(seconds=1 + i)) for i in range(5)]
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=10))
    keys = dict(
        Workload.objects.filter(pk__in=[w.pk for w in waiting]).values_list("pk", "queue_key")
    )
    assert queue_positions(Workload.objects.filter(pk__in=keys)) == {
        w.pk: place for place, w in enumerate(waiting, start=1)
    }

    run_end(
        run=Run.objects.get(workload=running[0]), reason=RunEndReason.SUCCEEDED,
        now=T0 + timedelta(seconds=20), exit_code=0,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=30))

    started = set(
        Workload.objects.filter(pk__in=keys, state=WorkloadState.RUNNING).values_list(
            "pk", flat=True
        )
    )
    assert started == {waiting[0].pk, waiting[1].pk}
    still = Workload.objects.filter(pk__in=keys, state=WorkloadState.PENDING)
    assert dict(still.values_list("pk", "queue_key")) == {
        pk: key for pk, key in keys.items() if pk not in started
    }
    assert queue_positions(still) == {w.pk: place for place, w in enumerate(waiting[2:], start=1)}


def test_a_second_cycle_does_not_start_anything_twice(world):
    workload = submit(world, gpus=8)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=5))

    assert Run.objects.filter(workload=workload).count() == 1
    assert Order.objects.filter(kind=OrderKind.START).count() == 1
    assert SchedulingCycle.objects.filter(cluster=world.cluster).count() == 2


def test_cancelled_pending_workload_is_not_started(world):
    workload = submit(world, gpus=8)
    workload_cancel(workload=workload, now=T0)

    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=5))

    workload.refresh_from_db()
    assert workload.state == WorkloadState.CANCELLED
    assert not Run.objects.filter(workload=workload).exists()


def test_budgeted_work_preempts_free_lane_work_and_stop_orders_go_out(world):
    free = submit(world, "unbudgeted", gpus=16, nodes=2, min_runtime=0)
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0)
    free_run = Run.objects.get(workload=free)
    budgeted = submit(world, gpus=8, at=T0 + timedelta(seconds=30))

    cycle = scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=60))

    free.refresh_from_db()
    free_run.refresh_from_db()
    budgeted.refresh_from_db()
    assert cycle.preemptions == 1
    assert free.state == WorkloadState.PREEMPTED
    assert free_run.ended_at is None  # ends when the agents confirm the stop
    assert free_run.stop_reason == RunEndReason.PREEMPTED
    assert free_run.preempted_by_id == budgeted.id
    stops = Order.objects.filter(run=free_run, kind=OrderKind.STOP)
    assert sorted(o.node.name for o in stops) == ["node1", "node2"]
    assert budgeted.state == WorkloadState.RUNNING
    # The preempted workload is not offered to the engine while its stop is pending.
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(seconds=65))
    assert Run.objects.filter(workload=free).count() == 1


def test_cycle_for_unknown_cluster_does_nothing(db):
    assert scheduling_cycle_run(cluster_id=987654) is None


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
    assert "holding" not in gang.engine_reason

    scheduling_cycle_run(cluster_id=world.cluster.id, now=first + timedelta(minutes=20))
    scheduling_cycle_run(cluster_id=world.cluster.id, now=first + timedelta(minutes=31))
    gang.refresh_from_db()
    assert gang.blocked_since == first  # kept from the first cycle, not restarted
    # the emptiest node, then the first whose work is preemptible soonest
    assert "holding node1, node4 (2 of the 2 nodes it needs) until they free" in gang.engine_reason


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
    assert "may preempt in 30 min if no GPUs free first" in owed.engine_reason

    # Just past the victim's checkpoint an eviction would lose only 6 minutes, but the
    # deadline stands.
    scheduling_cycle_run(cluster_id=world.cluster.id, now=T0 + timedelta(minutes=31))
    owed.refresh_from_db()
    victim.refresh_from_db()
    assert (owed.state, victim.state) == (WorkloadState.PENDING, WorkloadState.RUNNING)
    assert owed.patient_until == waiting_since + timedelta(minutes=30)
    assert "may preempt in 24 min if no GPUs free first" in owed.engine_reason

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
    assert f"holding {alpha_node}" in big.engine_reason
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
