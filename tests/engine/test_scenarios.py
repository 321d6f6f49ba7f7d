"""Hand-worked scenarios of the fairshare policy, with the expected orders written out."""

from __future__ import annotations

import pytest

from scheduler.engine import NodeState
from tests.engine.builders import HOUR, MINUTE, flat_tree, nodes, scheduler, work


def _ids(items):
    return [i.workload_id for i in items]


def test_debug_job_evicts_own_projects_long_run_past_minimum():
    sched = scheduler(nodes(1), flat_tree(pi=100))
    sched.add_running(work("train", "pi", 8, min_runtime=2 * HOUR), {"n0": 8}, 0.0)
    # Submitted an hour ago: longer than evicting "train" loses per GPU (8 x 5 min restart).
    sched.submit(work("debug", "pi", 1, submit=2 * HOUR, min_runtime=15 * MINUTE))
    result = sched.cycle(3 * HOUR, {"pi": 8 * 3 * HOUR})
    assert _ids(result.preemptions) == ["train"]
    assert result.preemptions[0].by == "debug"
    assert "same project" in result.preemptions[0].reason
    assert [(s.workload_id, s.placement) for s in result.starts] == [("debug", {"n0": 1})]
    # The run goes back to pending with its submit time kept.
    assert sched.pending_ids() == ["train"]
    assert "train" not in sched.running


def test_debug_job_waits_while_own_run_is_inside_its_minimum_and_says_when():
    sched = scheduler(nodes(1), flat_tree(pi=100))
    sched.add_running(work("train", "pi", 8, min_runtime=2 * HOUR), {"n0": 8}, 0.0)
    sched.submit(work("debug", "pi", 1, submit=HOUR, min_runtime=15 * MINUTE))
    result = sched.cycle(HOUR, {"pi": 8 * HOUR}, explain=True)
    assert result.preemptions == [] and result.starts == []
    reason = result.reasons["debug"]
    assert "waiting for 1 GPU on one node" in reason
    assert "next eligible victim reaches its minimum runtime in 60 min" in reason


def test_run_of_the_same_class_never_evicts_its_own_project_sibling():
    sched = scheduler(nodes(1), flat_tree(pi=100))
    sched.add_running(work("old", "pi", 8, submit=0.0), {"n0": 8}, 0.0)
    sched.submit(work("new", "pi", 8, submit=HOUR))
    result = sched.cycle(5 * HOUR, {"pi": 8 * 5 * HOUR})
    assert result.preemptions == []


def test_debug_job_on_full_cluster_evicts_the_cheapest_victim_not_a_whole_node_run():
    # Two teams of equal share; "busy" fills both nodes. Its 8-GPU run on n0 would lose
    # 8 x (10 min since checkpoint + 5 min restart) = 2 GPU-h; the 1-GPU jobs on n1 lose
    # 1 x (their minutes since checkpoint + 5 min), the cheapest being j3 (started 2 h 2 min
    # ago: 2 + 5 = 7 GPU-min).
    sched = scheduler(nodes(2), flat_tree(idle=50, busy=50))
    now = 10 * HOUR
    sched.add_running(work("big", "busy", 8), {"n0": 8}, now - 3 * HOUR - 10 * MINUTE)
    starts = [25, 17, 12, 2, 20, 28, 9, 14]  # minutes past the last checkpoint
    for i, minutes in enumerate(starts):
        sched.add_running(work(f"j{i}", "busy", 1), {"n1": 1}, now - 2 * HOUR - minutes * MINUTE)
    # Waiting 10 min: longer than evicting j3 loses (7 GPU-min for a 1-GPU job).
    sched.submit(work("debug", "idle", 1, submit=now - 10 * MINUTE, min_runtime=15 * MINUTE))
    result = sched.cycle(now, {"busy": 1e6, "idle": 0.0})
    assert _ids(result.preemptions) == ["j3"]
    assert result.preemptions[0].by == "debug"
    assert "loses 0.1 GPU-h" in result.preemptions[0].reason
    assert [(s.workload_id, s.placement) for s in result.starts] == [("debug", {"n1": 1})]


def test_gang_that_needs_two_whole_nodes_evicts_two_victims():
    sched = scheduler(nodes(3), flat_tree(small=70, big=30))
    now = 5 * HOUR
    sched.add_running(work("b0", "big", 8), {"n0": 8}, now - 3 * HOUR)
    sched.add_running(work("b1", "big", 8), {"n1": 8}, now - 4 * HOUR)
    sched.add_running(work("b2", "big", 8), {"n2": 8}, now - 30 * MINUTE)  # protected
    sched.submit(work("gang", "small", 16, nodes=2, submit=now - HOUR))
    result = sched.cycle(now, {"big": 1e6, "small": 0.0})
    assert sorted(_ids(result.preemptions)) == ["b0", "b1"]
    assert all(p.by == "gang" for p in result.preemptions)
    assert [(s.workload_id, s.placement) for s in result.starts] == [("gang", {"n0": 8, "n1": 8})]
    assert "b2" in sched.running


def test_workload_inside_its_minimum_runtime_is_never_preempted():
    # b holds all 16 GPUs (its entitlement is 8): its young run on n1 is what it borrows.
    sched = scheduler(nodes(2), flat_tree(a=50, b=50))
    sched.add_running(work("old", "b", 8, min_runtime=8 * HOUR), {"n0": 8}, 0.0)
    sched.add_running(work("young", "b", 8, min_runtime=2 * HOUR), {"n1": 8}, 0.0)
    sched.submit(work("urgent", "a", 4, submit=0.0, priority=10, min_runtime=15 * MINUTE))
    for t in (0.0, HOUR, 2 * HOUR - 1):
        assert sched.cycle(t, {"a": 0.0, "b": 1e6}).preemptions == []
    assert _ids(sched.cycle(2 * HOUR, {"a": 0.0, "b": 1e6}).preemptions) == ["young"]


def test_free_lane_work_is_evicted_at_once_by_charged_work():
    sched = scheduler(nodes(1), flat_tree(a=50, b=50))
    sched.submit(work("scavenger", "b", 8, min_runtime=0.0))
    assert _ids(sched.cycle(0.0, {}).starts) == ["scavenger"]
    sched.submit(work("charged", "b", 1, submit=60.0, min_runtime=15 * MINUTE))
    result = sched.cycle(60.0, {})
    assert _ids(result.preemptions) == ["scavenger"]
    assert "free-lane" in result.preemptions[0].reason
    assert _ids(result.starts) == ["charged"]


def test_two_teams_cannot_ping_pong():
    # Team "a" holds the whole cluster with a long history; team "b" (same share) arrives
    # with a backlog. Both have endless demand and nothing ever finishes. "b" may evict up
    # to its entitlement (16 of 32 GPUs); after that, neither team may evict the other:
    # every preemption goes one way, and their number is exactly what "b" was owed.
    sched = scheduler(nodes(4), flat_tree(a=50, b=50))
    for i in range(32):
        sched.add_running(work(f"a{i}", "a", 1, min_runtime=HOUR), {f"n{i // 8}": 1}, 0.0)
    for i in range(200):
        sched.submit(work(f"a-more{i}", "a", 1, submit=HOUR, min_runtime=HOUR))
        sched.submit(work(f"b{i}", "b", 1, submit=HOUR, min_runtime=HOUR))
    usage = {"a": 32 * 10 * HOUR, "b": 0.0}
    directions = []
    now, step = 10 * HOUR, 5 * MINUTE
    for _ in range(int(48 * HOUR / step)):
        result = sched.cycle(now, usage)
        for p in result.preemptions:
            directions.append((p.workload_id[0], p.by[0]))
        for rec in sched.running.values():
            usage[rec.workload.project] += rec.workload.gpus * step
        now += step
    assert set(directions) == {("a", "b")}
    assert len(directions) == 16
    held = {"a": 0, "b": 0}
    for rec in sched.running.values():
        held[rec.workload.project] += rec.workload.gpus
    assert held == {"a": 16, "b": 16}


def test_draining_node_takes_nothing_new_and_reports_drained_once_empty():
    sched = scheduler(nodes(2), flat_tree(a=100))
    sched.add_running(work("long", "a", 4, min_runtime=2 * HOUR), {"n0": 4}, 0.0)
    sched.add_running(work("other", "a", 8, min_runtime=2 * HOUR), {"n1": 8}, 0.0)
    sched.set_node_state("n0", NodeState.DRAINING)
    sched.submit(work("fits-only-on-n0", "a", 2, submit=0.0))
    early = sched.cycle(HOUR, {})
    assert early.starts == [] and early.preemptions == [] and early.drained == []
    late = sched.cycle(2 * HOUR, {})
    assert [(p.workload_id, p.kind, p.by) for p in late.preemptions] == [("long", "drain", None)]
    assert "draining" in late.preemptions[0].reason
    assert late.drained == ["n0"]
    assert sched.node_state("n0") == NodeState.DRAINED
    # The drained node stays out of service until an operator brings it back.
    assert sched.cycle(2 * HOUR + 1, {}).starts == []
    sched.set_node_state("n0", NodeState.HEALTHY)
    assert {s.workload_id for s in sched.cycle(2 * HOUR + 2, {}).starts} == {
        "fits-only-on-n0",
        "long",
    }


def test_forced_drain_evicts_even_protected_work_at_once():
    sched = scheduler(nodes(1), flat_tree(a=100))
    sched.add_running(work("young", "a", 8, min_runtime=2 * HOUR), {"n0": 8}, 0.0)
    sched.set_node_state("n0", NodeState.DRAINING, force=True)
    result = sched.cycle(60.0, {})
    assert [(p.workload_id, p.kind) for p in result.preemptions] == [("young", "drain")]
    assert "forced" in result.preemptions[0].reason
    assert result.drained == ["n0"]


def test_down_node_requeues_its_work_at_the_next_cycle():
    sched = scheduler(nodes(2), flat_tree(a=100))
    sched.add_running(work("w", "a", 8), {"n0": 8}, 0.0)
    sched.set_node_state("n0", NodeState.DOWN)
    result = sched.cycle(60.0, {})
    assert [(p.workload_id, p.kind) for p in result.preemptions] == [("w", "drain")]
    assert "down" in result.preemptions[0].reason
    # It cannot restart in the cycle that evicted it; it does at the next one, elsewhere.
    assert [(s.workload_id, s.placement) for s in sched.cycle(61.0, {}).starts] == [
        ("w", {"n1": 8})
    ]


def test_single_node_work_bin_packs_onto_the_fullest_node_that_fits():
    sched = scheduler(nodes(3), flat_tree(a=100))
    sched.add_running(work("x", "a", 6), {"n2": 6}, 0.0)
    sched.add_running(work("y", "a", 3), {"n1": 3}, 0.0)
    sched.submit(work("two", "a", 2, submit=1.0))
    sched.submit(work("four", "a", 4, submit=2.0))
    result = sched.cycle(10.0, {})
    assert [(s.workload_id, s.placement) for s in result.starts] == [
        ("two", {"n2": 2}),
        ("four", {"n1": 4}),
    ]


def test_gang_starts_whole_or_not_at_all():
    sched = scheduler(nodes(3), flat_tree(a=100))
    sched.add_running(work("x", "a", 1, min_runtime=8 * HOUR), {"n0": 1}, 0.0)
    sched.add_running(work("y", "a", 1, min_runtime=8 * HOUR), {"n1": 1}, 0.0)
    sched.submit(work("gang", "a", 16, nodes=2, submit=0.0))
    result = sched.cycle(10.0, {})
    assert result.starts == []
    assert sched.free_gpus() == 22


def test_work_bigger_than_a_node_becomes_a_gang_of_whole_nodes():
    sched = scheduler(nodes(3), flat_tree(a=100))
    sched.submit(work("wide", "a", 12, submit=0.0))
    result = sched.cycle(0.0, {})
    assert [(s.workload_id, s.placement) for s in result.starts] == [("wide", {"n0": 6, "n1": 6})]


def test_gang_waiting_past_the_bound_reserves_nodes_so_small_jobs_cannot_starve_it():
    sched = scheduler(
        nodes(2), flat_tree(a=50, b=50), gang_reserve_after=30 * MINUTE, max_reserved_fraction=1.0
    )
    sched.add_running(work("a0", "a", 4, min_runtime=8 * HOUR), {"n0": 4}, 0.0)
    sched.add_running(work("a1", "a", 4, min_runtime=8 * HOUR), {"n1": 4}, 0.0)
    sched.submit(work("gang", "b", 16, nodes=2, submit=0.0))
    usage = {"a": 1e6, "b": 0.0}
    sched.cycle(0.0, usage)  # the gang is blocked at the head of its turn from now on
    sched.finish("a0")
    sched.submit(work("small-1", "a", 2, submit=10 * MINUTE))
    # Before the bound, a small job may still use n0.
    assert _ids(sched.cycle(10 * MINUTE, usage).starts) == ["small-1"]
    sched.finish("small-1")
    # Past the bound, n0 is held for the gang: a small job protected beyond a1 (until 8 h)
    # would delay the gang past the moment it could evict a1, so it waits and says why.
    sched.submit(work("small-2", "a", 2, submit=31 * MINUTE, min_runtime=8 * HOUR))
    result = sched.cycle(31 * MINUTE, usage, explain=True)
    assert result.starts == []
    assert "holding" in result.reasons["gang"]
    sched.finish("a1")
    assert [(s.workload_id, s.placement) for s in sched.cycle(40 * MINUTE, usage).starts] == [
        ("gang", {"n0": 8, "n1": 8})
    ]


def test_gang_gets_nodes_cleared_past_the_bound_even_when_no_node_may_be_held():
    # No node may be held (the cap on held nodes is spent). Team b is below its entitlement
    # (0 of 16 GPUs) and its gang needs 24, more than a reclaim may take; project c has no
    # budget and runs 4 GPUs on each of n1-n3, past their minimum runtime. Holding nothing
    # must not stop the gang's wait from counting, nor its right to have nodes cleared.
    sched = scheduler(
        nodes(4), flat_tree(a=50, b=50), gang_reserve_after=30 * MINUTE, max_reserved_fraction=0.0
    )
    sched.add_running(work("a0", "a", 8, min_runtime=8 * HOUR), {"n0": 8}, 0.0)
    for i in (1, 2, 3):
        sched.add_running(work(f"c{i}", "c", 4, min_runtime=HOUR), {f"n{i}": 4}, 0.0)
    sched.submit(work("gang", "b", 24, nodes=3, submit=2 * HOUR))
    usage = {"a": 1e6, "b": 0.0}
    assert sched.cycle(2 * HOUR, usage).starts == []
    result = sched.cycle(2 * HOUR + 31 * MINUTE, usage)
    assert sorted(_ids(result.preemptions)) == ["c1", "c2", "c3"]
    assert [(s.workload_id, s.placement) for s in result.starts] == [
        ("gang", {"n1": 8, "n2": 8, "n3": 8})
    ]


def test_backfill_uses_free_gpus_but_not_the_node_held_for_a_blocked_bigger_job():
    sched = scheduler(nodes(2), flat_tree(a=50, b=50))
    sched.add_running(work("x", "b", 5, min_runtime=8 * HOUR), {"n0": 5}, 0.0)
    sched.add_running(work("y", "b", 6, min_runtime=8 * HOUR), {"n1": 6}, 0.0)
    sched.submit(work("needs-4", "a", 4, submit=0.0))
    sched.submit(work("small", "b", 2, submit=1.0))
    sched.submit(work("tiny", "b", 1, submit=2.0))
    # "a" ranks first; its 4-GPU job fits nowhere and holds n0 (3 free, the most). The
    # later, smaller jobs may only use n1.
    result = sched.cycle(10.0, {"a": 0.0, "b": 1e6}, explain=True)
    assert [(s.workload_id, s.placement) for s in result.starts] == [("small", {"n1": 2})]
    assert (
        "holding n0 until it frees (meanwhile work protected for at most 30 min may borrow the "
        "free GPUs"
    ) in result.reasons["needs-4"]


def test_free_lane_may_backfill_onto_a_held_node_and_yields_to_charged_work():
    sched = scheduler(nodes(1), flat_tree(a=50, b=50))
    sched.add_running(work("x", "b", 5, min_runtime=8 * HOUR), {"n0": 5}, 0.0)
    sched.submit(work("needs-4", "a", 4, submit=0.0))
    sched.submit(work("scavenger", "b", 3, submit=1.0, min_runtime=0.0))
    result = sched.cycle(10.0, {"a": 0.0, "b": 1e6})
    assert _ids(result.starts) == ["scavenger"]
    assert "free lane" in result.starts[0].reason
    sched.finish("x")
    result = sched.cycle(20.0, {"a": 0.0, "b": 1e6})
    assert _ids(result.starts) == ["needs-4"]


def test_every_pending_workload_gets_a_reason_and_the_order_is_fair_share_order():
    sched = scheduler(nodes(1), flat_tree(a=50, b=50))
    sched.add_running(work("x", "b", 8, min_runtime=8 * HOUR), {"n0": 8}, 0.0)
    sched.submit(work("b-late", "b", 1, submit=5.0))
    sched.submit(work("a-1", "a", 1, submit=9.0))
    sched.submit(work("a-2", "a", 2, submit=10.0))
    sched.submit(work("free", "a", 1, submit=1.0, min_runtime=0.0))
    sched.submit(work("nobody", "unbudgeted", 1, submit=0.0))
    result = sched.cycle(60.0, {"a": 10.0, "b": 1e6}, explain=True)
    assert result.order == ["a-1", "a-2", "b-late", "nobody", "free"]
    assert set(result.reasons) == set(result.order)
    # a used 10 GPU-seconds of the window, b a million.
    assert result.reasons["a-1"].startswith(
        "project used no more than its share over the window (rank 1 of 2 in organization"
    )
    assert result.reasons["b-late"].startswith(
        "project used more than its share over the window (rank 2 of 2 in organization"
    )
    assert "no budget share" in result.reasons["nobody"]
    assert "free lane" in result.reasons["free"]


def test_preemptions_per_cycle_are_capped_and_the_rest_follow_next_cycle():
    sched = scheduler(nodes(1), flat_tree(a=50, b=50), max_preemptions_per_cycle=2)
    for i in range(8):
        sched.add_running(work(f"b{i}", "b", 1, min_runtime=0.0), {"n0": 1}, 0.0)
    for i in range(4):
        sched.submit(work(f"a{i}", "a", 1, submit=1.0))
    assert len(sched.cycle(60.0, {}).preemptions) == 2
    assert len(sched.cycle(61.0, {}).preemptions) == 2


def test_submit_refuses_work_the_cluster_can_never_hold():
    sched = scheduler(nodes(2), flat_tree(a=100))
    with pytest.raises(ValueError, match="more than the cluster has"):
        sched.submit(work("huge", "a", 24))
    with pytest.raises(ValueError, match="min_runtime"):
        sched.submit(work("bad", "a", 1, min_runtime=-1.0))
    with pytest.raises(ValueError, match="already known"):
        sched.submit(work("x", "a"))
        sched.submit(work("x", "a"))


def test_nothing_changed_cycle_decides_nothing_and_keeps_state():
    sched = scheduler(nodes(1), flat_tree(a=100))
    sched.add_running(work("x", "a", 8), {"n0": 8}, 0.0)
    sched.submit(work("y", "a", 8, submit=1.0))
    first = sched.cycle(10.0, {"a": 1.0})
    second = sched.cycle(11.0, {"a": 2.0})
    assert first.starts == second.starts == []
    assert sched.pending_ids() == ["y"]
