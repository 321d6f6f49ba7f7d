"""Drain (``docs/design.md``, "Drain").

An operator marks a node for repair: nothing new lands there; each running workload is
evicted (requeued) as soon as it reaches its minimum runtime, not before; the node reports
drained once empty. Only a forced drain evicts inside the minimum runtime.
"""

from __future__ import annotations

from scheduler.engine import NodeState
from tests.engine.conftest import (
    HOUR,
    MINUTE,
    budget,
    build_nodes,
    build_scheduler,
    build_workload,
    leaf,
    preempted_ids,
    started_ids,
)

T0 = 50 * HOUR
USAGE = {"alpha": 1000.0, "beta": 1000.0}


def tree():
    return budget("root", 100, leaf("alpha", 50), leaf("beta", 50))


def cluster_with_a_busy_node(policy="fairshare"):
    """n0 runs w-1h (1 h minimum) and w-2h (2 h minimum), both started at T0; n1 is full."""
    sched = build_scheduler(build_nodes(2), tree(), policy=policy)
    sched.add_running(build_workload("w-1h", "alpha", 4, min_runtime=HOUR), {"n0": 4}, T0)
    sched.add_running(build_workload("w-2h", "beta", 2, min_runtime=2 * HOUR), {"n0": 2}, T0)
    sched.add_running(build_workload("w-n1", "beta", 8, min_runtime=8 * HOUR), {"n1": 8}, T0)
    return sched


def test_draining_node_takes_nothing_new_even_with_free_gpus():
    sched = cluster_with_a_busy_node()
    sched.set_node_state("n0", NodeState.DRAINING)
    sched.submit(build_workload("fits-n0", "alpha", 2, submit=T0))
    result = sched.cycle(T0 + MINUTE, USAGE)
    assert started_ids(result) == []
    assert sched.pending_ids() == ["fits-n0"]


def test_each_workload_on_a_draining_node_is_evicted_exactly_at_its_minimum_runtime():
    sched = cluster_with_a_busy_node()
    sched.set_node_state("n0", NodeState.DRAINING)
    assert sched.cycle(T0 + 10 * MINUTE, USAGE).preemptions == []
    assert sched.cycle(T0 + HOUR - 1, USAGE).preemptions == []

    at_1h = sched.cycle(T0 + HOUR, USAGE)
    assert preempted_ids(at_1h) == ["w-1h"]
    assert at_1h.preemptions[0].kind == "drain"
    assert at_1h.preemptions[0].by is None
    assert at_1h.drained == []

    assert sched.cycle(T0 + 2 * HOUR - 1, USAGE).preemptions == []
    at_2h = sched.cycle(T0 + 2 * HOUR, USAGE)
    assert preempted_ids(at_2h) == ["w-2h"]
    assert at_2h.preemptions[0].kind == "drain"
    # The other node's work is untouched throughout.
    assert "w-n1" in sched.running


def test_drained_workloads_are_requeued_and_not_restarted_on_the_draining_node():
    sched = cluster_with_a_busy_node()
    sched.set_node_state("n0", NodeState.DRAINING)
    sched.cycle(T0 + HOUR, USAGE)
    assert "w-1h" in sched.pending_ids()
    assert "w-1h" not in sched.running
    result = sched.cycle(T0 + HOUR + MINUTE, USAGE)
    assert all("n0" not in s.placement for s in result.starts)


def test_node_reports_drained_once_when_it_becomes_empty():
    sched = cluster_with_a_busy_node()
    sched.set_node_state("n0", NodeState.DRAINING)
    drained = []
    for t in [T0 + HOUR, T0 + 90 * MINUTE, T0 + 2 * HOUR, T0 + 2 * HOUR + MINUTE, T0 + 3 * HOUR]:
        drained.extend(sched.cycle(t, USAGE).drained)
    assert drained == ["n0"]
    assert sched.node_state("n0") == NodeState.DRAINED
    assert sched.node_state("n1") == NodeState.HEALTHY


def test_empty_node_marked_draining_reports_drained_at_the_next_cycle():
    sched = build_scheduler(build_nodes(2), tree())
    sched.set_node_state("n1", NodeState.DRAINING)
    assert sched.cycle(T0, USAGE).drained == ["n1"]
    assert sched.node_state("n1") == NodeState.DRAINED
    assert sched.cycle(T0 + MINUTE, USAGE).drained == []


def test_free_lane_work_on_a_draining_node_is_evicted_at_once():
    sched = build_scheduler(build_nodes(1), tree())
    sched.add_running(build_workload("free", "alpha", 8, min_runtime=0.0), {"n0": 8}, T0)
    sched.set_node_state("n0", NodeState.DRAINING)
    result = sched.cycle(T0 + 1, USAGE)
    assert preempted_ids(result) == ["free"]
    assert result.drained == ["n0"]


def test_forced_drain_evicts_immediately_inside_the_minimum_runtime():
    sched = cluster_with_a_busy_node()
    sched.set_node_state("n0", NodeState.DRAINING, force=True)
    result = sched.cycle(T0 + MINUTE, USAGE)
    assert sorted(preempted_ids(result)) == ["w-1h", "w-2h"]
    assert all(p.kind == "drain" and p.by is None for p in result.preemptions)
    assert result.drained == ["n0"]
    assert "w-n1" in sched.running


def test_drain_follows_minimum_runtime_under_every_preempting_and_non_preempting_policy():
    for policy in ("fairshare", "quota", "partition", "fifo"):
        sched = cluster_with_a_busy_node(policy)
        sched.set_node_state("n0", NodeState.DRAINING)
        assert sched.cycle(T0 + HOUR - 1, USAGE).preemptions == [], policy
        assert preempted_ids(sched.cycle(T0 + HOUR, USAGE)) == ["w-1h"], policy


def test_node_back_to_healthy_takes_work_again():
    sched = build_scheduler(build_nodes(1), tree())
    sched.set_node_state("n0", NodeState.DRAINING)
    sched.submit(build_workload("job", "alpha", 8, submit=T0))
    assert sched.cycle(T0, USAGE).starts == []
    sched.set_node_state("n0", NodeState.HEALTHY)
    assert started_ids(sched.cycle(T0 + MINUTE, USAGE)) == ["job"]


def test_workloads_on_a_node_that_went_down_are_requeued_at_the_next_cycle():
    # A down node is not a preemption: its work is gone, so it is requeued whatever its age.
    sched = cluster_with_a_busy_node()
    sched.set_node_state("n0", NodeState.DOWN)
    result = sched.cycle(T0 + MINUTE, USAGE)
    assert sorted(preempted_ids(result)) == ["w-1h", "w-2h"]
    assert all(p.kind == "drain" for p in result.preemptions)
    assert {"w-1h", "w-2h"} <= set(sched.pending_ids())
    assert set(sched.running) == {"w-n1"}
