"""Idle runs are the first victims (``docs/design.md``, "Preemption").

A running workload the driver marks idle (``Scheduler.set_idle``: its GPUs below 5 % busy
for 30 minutes while past its minimum runtime) is taken before any busy one among the
victims the policy already allows; among idle runs, and among busy ones, the order stays
fewest GPU-hours lost first. The flag never makes a victim of a protected run. The
incremental engine sees a run become idle or busy again as a full recomputation does.
"""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.engine import POLICIES, Scheduler, make_policy
from scheduler.simulator import ReplayConfig, replay
from tests.engine.conftest import (
    HOUR,
    MINUTE,
    budget,
    build_nodes,
    build_scheduler,
    build_workload,
    leaf,
    placement_of,
    preempted_ids,
)
from tests.engine.test_incremental import (
    GPUS_PER_NODE,
    SETTINGS,
    budgets,
    cycle_orders,
    jobs,
    trace_of,
)

T0 = 1000 * HOUR  # runs below start here
LATER = T0 + 3 * HOUR + 10 * MINUTE  # past a 2 h minimum, 10 min after a checkpoint
OVER = {"alpha": 0.0, "beta": 500_000.0}  # alpha ranks first


def halves():
    return budget("root", 100, leaf("alpha", 50), leaf("beta", 50))


def run(sched, wid, project, placement, *, min_runtime=2 * HOUR, resumable=True, idle=False):
    gpus = sum(placement.values())
    w = build_workload(
        wid, project, gpus, min_runtime=min_runtime, nodes=len(placement), resumable=resumable
    )
    sched.add_running(w, placement, T0, idle=idle)
    return w


def debug(wid, project, gpus=1):
    """A debug job waiting since T0: at LATER its patience (at most its own 15 min) is over."""
    return build_workload(wid, project, gpus, submit=T0, min_runtime=15 * MINUTE)


def two_beta_runs(*, idle_min_runtime=2 * HOUR):
    """beta (50 %, entitled 8 of 16 GPUs) runs 16: ``busy`` on n0, resumable, loses
    8 x (10 min + 5 min restart) = 2 GPU-hours; ``sleepy`` on n1, not resumable, loses its
    whole 3 h 10 min x 8 GPUs = 25.3 GPU-hours. alpha waits with a 1-GPU debug job."""
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "busy", "beta", {"n0": 8})
    run(sched, "sleepy", "beta", {"n1": 8}, resumable=False, min_runtime=idle_min_runtime)
    sched.submit(debug("alpha-debug", "alpha"))
    return sched


def test_without_idle_runs_the_least_work_lost_goes():
    sched = two_beta_runs()
    result = sched.cycle(LATER, OVER)
    assert preempted_ids(result) == ["busy"]
    assert placement_of(result, "alpha-debug") == {"n0": 1}


def test_an_idle_run_goes_before_a_busy_one_that_loses_less():
    sched = two_beta_runs()
    sched.set_idle("sleepy", True)
    assert sched.running["sleepy"].idle
    result = sched.cycle(LATER, OVER)
    assert preempted_ids(result) == ["sleepy"]
    assert result.preemptions[0].by == "alpha-debug"
    assert placement_of(result, "alpha-debug") == {"n1": 1}
    # The eviction reports the idle run's real loss: 25.3 GPU-hours of work.
    assert "25.3" in result.preemptions[0].reason
    assert "busy" in sched.running


def test_a_run_busy_again_is_ordered_as_before():
    sched = two_beta_runs()
    sched.set_idle("sleepy", True)
    sched.set_idle("sleepy", False)
    assert not sched.running["sleepy"].idle
    assert preempted_ids(sched.cycle(LATER, OVER)) == ["busy"]


def test_an_idle_run_inside_its_minimum_runtime_is_not_taken():
    # sleepy is protected for 8 h (until T0 + 8 h, after LATER): idle or not, no victim.
    sched = two_beta_runs(idle_min_runtime=8 * HOUR)
    sched.set_idle("sleepy", True)
    result = sched.cycle(LATER, OVER)
    assert preempted_ids(result) == ["busy"]
    assert placement_of(result, "alpha-debug") == {"n0": 1}


def test_the_flag_makes_no_run_of_a_team_at_its_entitlement_a_victim():
    # beta runs only its entitled 8: nothing of beta's may be reclaimed, idle or not; alpha's
    # own run is of the same class as the waiting job, so no swap either.
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "sleepy", "beta", {"n0": 8}, idle=True)
    run(sched, "alpha-run", "alpha", {"n1": 8})
    sched.submit(build_workload("alpha-train", "alpha", 1, submit=T0, min_runtime=2 * HOUR))
    assert sched.cycle(LATER, OVER).preemptions == []


def test_a_gang_clears_the_node_whose_work_is_idle_first():
    # 4 nodes, alpha 60 % (19 GPUs entitled), beta 40 % (13) runs all 32. n0, n1: cheap
    # resumable runs (2 GPU-hours each); n2: not resumable (25.3 GPU-hours) but idle; n3:
    # inside its minimum. Without the flag the gang takes n0 and n1 (the same world as the
    # preemption spec); with n2 idle it takes n2 first, then the cheapest busy node, n0.
    root = budget("root", 100, leaf("alpha", 60), leaf("beta", 40))
    sched = build_scheduler(build_nodes(4), root)
    run(sched, "b0", "beta", {"n0": 8})
    run(sched, "b1", "beta", {"n1": 8})
    run(sched, "b2", "beta", {"n2": 8}, resumable=False, idle=True)
    run(sched, "b3", "beta", {"n3": 8}, min_runtime=8 * HOUR)
    # Waiting since T0 - 10 h: longer than the eviction loses per GPU (27.3 h x 8 / 16).
    sched.submit(build_workload("gang", "alpha", 16, nodes=2, submit=T0 - 10 * HOUR))
    result = sched.cycle(LATER, OVER)
    assert sorted(preempted_ids(result)) == ["b0", "b2"]
    assert placement_of(result, "gang") == {"n0": 8, "n2": 8}
    assert set(sched.running) == {"gang", "b1", "b3"}


def test_a_rebuilt_engine_keeps_the_flag_and_a_restarted_run_starts_busy():
    sched = two_beta_runs()
    sched.set_idle("sleepy", True)
    assert sched.rebuilt().running["sleepy"].idle
    assert preempted_ids(sched.rebuilt().cycle(LATER, OVER)) == ["sleepy"]
    sched.cycle(LATER, OVER)  # sleepy is evicted and requeued
    assert "sleepy" not in sched.running


# ------------------------------------------------------------ incremental = full recomputation


class _Flipping:
    """A scheduler whose cycles first mark each running workload idle or busy by a fixed
    pattern of (seed, workload, half hour), then append the cycle's orders to ``log``.

    The pattern depends only on its arguments, so two schedulers that took the same
    decisions so far see the same flips; a run flips on and off as half hours pass."""

    def __init__(self, sched: Scheduler, log: list, seed: int) -> None:
        self._sched = sched
        self._log = log
        self._seed = seed
        self.flips = 0

    def __getattr__(self, name):
        return getattr(self._sched, name)

    def cycle(self, now, usage, explain=False):
        slot = int(now // 1800)
        for wid in sorted(self._sched.running):
            idle = zlib.crc32(f"{self._seed}:{wid}:{slot}".encode()) % 3 == 0
            if idle != self._sched.running[wid].idle:
                self._sched.set_idle(wid, idle)
                self.flips += 1
        result = self._sched.cycle(now, usage, explain)
        if result.starts or result.preemptions or result.drained:
            self._log.append((now, *cycle_orders(result)))
        return result


def _flipping_orders(trace, tree, gpus, policy, incremental, seed):
    log: list = []
    made: list[_Flipping] = []

    def factory(nodes, budget_root, policy_name, params):
        sched = Scheduler(
            nodes,
            budget_root,
            policy=make_policy(policy_name),
            params=params,
            incremental=incremental,
        )
        made.append(_Flipping(sched, log, seed))
        return made[-1]

    config = ReplayConfig(gpus=gpus, policy=policy, record_runs=False)
    replay(trace, tree, config, scheduler_factory=factory)
    return log, sum(m.flips for m in made)


@SETTINGS
@given(
    trace_jobs=jobs(),
    tree=budgets(),
    nodes=st.integers(2, 6),
    policy=st.sampled_from(POLICIES),
    seed=st.integers(0, 1000),
)
def test_incremental_orders_equal_a_full_recomputation_while_runs_flip_idle(
    trace_jobs, tree, nodes, policy, seed
):
    trace = trace_of(trace_jobs)
    gpus = nodes * GPUS_PER_NODE

    reference, _ = _flipping_orders(trace, tree, gpus, policy, False, seed)
    incremental, _ = _flipping_orders(trace, tree, gpus, policy, True, seed)

    assert incremental == reference


def test_the_flipping_history_flips_and_both_paths_agree():
    """The property above is not vacuous: on a busy two-team history runs do flip and
    evictions happen, and both paths take the same decisions."""
    from scheduler.simulator.budgets import Budget
    from scheduler.simulator.traces import TraceJob

    trace_jobs = [
        TraceJob(f"b{i}", submit_time=60.0 * i, duration=20 * HOUR, gpus=2, project="p1")
        for i in range(8)
    ] + [
        TraceJob(f"a{i}", submit_time=4 * HOUR + 600.0 * i, duration=HOUR, gpus=2, project="p0")
        for i in range(6)
    ]
    trace = trace_of(sorted(trace_jobs, key=lambda j: (j.submit_time, j.id)))
    tree = Budget("org", 100.0, [Budget("p0", 50.0), Budget("p1", 50.0)])
    log, flips = _flipping_orders(trace, tree, 16, "fairshare", True, seed=7)
    assert flips > 0
    assert any(preempted for _, _, preempted in log)
    reference, _ = _flipping_orders(trace, tree, 16, "fairshare", False, seed=7)
    assert log == reference


def test_only_a_running_workload_can_be_marked_idle():
    sched = two_beta_runs()
    with pytest.raises(KeyError):
        sched.set_idle("alpha-debug", True)  # pending, not running
