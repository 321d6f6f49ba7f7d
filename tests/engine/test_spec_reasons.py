"""Reasons (``docs/design.md``, "Reasons"): every decision has a reason a person can read.

With ``explain=True`` every workload still pending has a plain-words reason; a gang's reason
speaks of whole nodes; the reason of a team over its budget says so.
"""

from __future__ import annotations

import pytest

from scheduler.engine import POLICIES, NodeState
from tests.engine.conftest import (
    HOUR,
    MINUTE,
    budget,
    build_nodes,
    build_scheduler,
    build_workload,
    leaf,
)

NOW = 20 * HOUR


def tree():
    return budget("root", 100, leaf("alpha", 20), leaf("beta", 80))


# alpha: (9000/10000) / 0.2 = 4.5 -> far over budget ; beta: (1000/10000) / 0.8 = 0.125
USAGE = {"alpha": 9000.0, "beta": 1000.0}


def busy_cluster(policy="fairshare"):
    """3 nodes: n0 full of protected beta work, n1 half full, n2 draining."""
    sched = build_scheduler(build_nodes(3), tree(), policy=policy)
    sched.add_running(build_workload("b-run", "beta", 8, min_runtime=8 * HOUR), {"n0": 8}, NOW)
    sched.add_running(build_workload("b-half", "beta", 4, min_runtime=8 * HOUR), {"n1": 4}, NOW)
    sched.set_node_state("n2", NodeState.DRAINING)
    return sched


def submit_mix(sched):
    sched.submit(build_workload("a-gang", "alpha", 16, nodes=2, submit=NOW))
    sched.submit(build_workload("a-big", "alpha", 8, submit=NOW))
    sched.submit(build_workload("a-debug", "alpha", 1, submit=NOW, min_runtime=15 * MINUTE))
    sched.submit(build_workload("b-big", "beta", 6, submit=NOW))
    sched.submit(build_workload("stray", "nobody", 8, submit=NOW))
    sched.submit(build_workload("b-free", "beta", 8, submit=NOW, min_runtime=0.0))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_pending_workload_has_a_plain_words_reason(policy):
    sched = busy_cluster(policy)
    submit_mix(sched)
    result = sched.cycle(NOW, USAGE, explain=True)
    pending = set(sched.pending_ids())
    assert pending, "the scenario must leave work pending"
    assert set(result.reasons) == pending
    for wid, reason in result.reasons.items():
        assert isinstance(reason, str) and len(reason.strip()) >= 10, (wid, reason)
        assert any(c.isalpha() for c in reason)
    assert sorted(result.order) == sorted(pending)


def test_reasons_are_only_given_when_asked():
    sched = busy_cluster()
    submit_mix(sched)
    result = sched.cycle(NOW, USAGE)
    assert result.reasons == {} and result.order == []


def test_gang_reason_mentions_whole_nodes():
    sched = busy_cluster()
    sched.submit(build_workload("a-gang", "alpha", 16, nodes=2, submit=NOW))
    result = sched.cycle(NOW, USAGE, explain=True)
    assert "whole node" in result.reasons["a-gang"].lower()


def test_gang_reason_mentions_whole_nodes_even_behind_its_projects_other_work():
    sched = busy_cluster()
    submit_mix(sched)
    result = sched.cycle(NOW, USAGE, explain=True)
    assert "whole node" in result.reasons["a-gang"].lower()


def test_a_team_over_its_share_of_the_window_is_told_so_in_the_windows_words():
    sched = busy_cluster()
    submit_mix(sched)
    result = sched.cycle(NOW, USAGE, explain=True)
    # alpha's debug job fits within alpha's entitlement (20 % of 16 healthy GPUs: 3.2): it
    # starts whatever the window says. alpha used 90 % of the window for its 20 %: its other
    # work is told so, in the window's words ("over budget" read as the rule that held it).
    assert "a-debug" in [s.workload_id for s in result.starts]
    for wid in ("a-big", "a-gang"):
        assert result.reasons[wid].startswith(
            "project used more than its share over the window (rank 2 of 2 in organization root)"
        ), wid


def test_a_team_within_its_share_of_the_window_is_told_so():
    sched = busy_cluster()
    sched.submit(build_workload("b-big", "beta", 6, submit=NOW))
    result = sched.cycle(NOW, USAGE, explain=True)
    # beta used 10 % of the window for its 80 %.
    assert result.reasons["b-big"].startswith(
        "project used no more than its share over the window (rank 1 of 2 in organization root)"
    )


def test_start_and_preemption_orders_carry_reasons():
    # alpha (20 %: 2 of 8 GPUs) runs 8: its 6-GPU run is above what it is owed.
    sched = build_scheduler(build_nodes(1), tree())
    sched.add_running(build_workload("a-own", "alpha", 2, min_runtime=8 * HOUR), {"n0": 2}, NOW)
    sched.add_running(build_workload("a-run", "alpha", 6, min_runtime=HOUR), {"n0": 6}, NOW)
    sched.submit(build_workload("b-debug", "beta", 2, submit=NOW, min_runtime=15 * MINUTE))
    result = sched.cycle(NOW + 2 * HOUR, USAGE)
    assert [p.workload_id for p in result.preemptions] == ["a-run"]
    assert result.preemptions[0].reason.strip()
    assert [s.workload_id for s in result.starts] == ["b-debug"]
    assert result.starts[0].reason.strip()


def gang_world(**params):
    """4 nodes; alpha and beta are owed 16 GPUs each. beta runs 8 GPUs on every node: on
    n0 and n1 for 8 protected hours, on n2 and n3 past a one-hour minimum runtime."""
    sched = build_scheduler(
        build_nodes(4), budget("root", 100, leaf("alpha", 50), leaf("beta", 50)), **params
    )
    for i, (minimum, started) in enumerate([(8 * HOUR, NOW)] * 2 + [(HOUR, NOW - 2 * HOUR)] * 2):
        run = build_workload(f"b{i}", "beta", 8, min_runtime=minimum)
        sched.add_running(run, {f"n{i}": 8}, started)
    return sched


def test_a_blocked_gang_says_when_it_will_hold_nodes():
    sched = gang_world()
    sched.submit(build_workload("a-gang", "alpha", 32, nodes=4, submit=NOW))
    reason = sched.cycle(NOW, {}, explain=True).reasons["a-gang"]
    assert "holds whole nodes in 30 min" in reason, reason
    reason = sched.cycle(NOW + 10 * MINUTE, {}, explain=True).reasons["a-gang"]
    assert "holds whole nodes in 20 min" in reason, reason


def test_a_gang_past_its_wait_says_how_many_nodes_could_be_cleared_and_why_it_holds_none():
    # Three nodes needed; only n2 and n3 run work past its minimum runtime, and beta runs
    # 16 GPUs above its entitlement, so both may be cleared; at most 2 nodes may be held.
    sched = gang_world()
    sched.submit(build_workload("a-gang", "alpha", 24, nodes=3, submit=NOW))
    sched.cycle(NOW, {}, explain=True)
    result = sched.cycle(NOW + 31 * MINUTE, {}, explain=True)
    assert not result.starts and not result.preemptions
    reason = result.reasons["a-gang"]
    assert "2 of the 3 nodes it needs could be cleared for it now" in reason, reason
    assert "needs more nodes than may be held at once (2," in reason, reason


def test_a_gang_that_holds_nodes_names_them_and_how_many_it_needs():
    sched = gang_world()
    for i in (2, 3):
        sched.finish(f"b{i}")
    sched.add_running(build_workload("b2", "beta", 8, min_runtime=8 * HOUR), {"n2": 8}, NOW)
    sched.add_running(build_workload("b3", "beta", 4, min_runtime=8 * HOUR), {"n3": 4}, NOW)
    sched.submit(build_workload("a-gang", "alpha", 16, nodes=2, submit=NOW))
    sched.cycle(NOW, {}, explain=True)
    reason = sched.cycle(NOW + 31 * MINUTE, {}, explain=True).reasons["a-gang"]
    # n3 is the emptiest node (4 GPUs in use), then the others by name.
    assert "holding n0, n3 (2 of the 2 nodes it needs) until they free" in reason, reason


def test_a_gang_of_a_team_at_its_entitlement_is_told_no_nodes_are_cleared_for_it():
    # alpha already runs its 16 GPUs (n2, n3); beta runs n0 and 7 GPUs of n1 (one GPU is
    # free, so the walk reaches alpha's turn); no node may be held.
    sched = build_scheduler(
        build_nodes(4),
        budget("root", 100, leaf("alpha", 50), leaf("beta", 50)),
        max_reserved_fraction=0.0,
    )
    for i, (project, gpus) in enumerate([("beta", 8), ("beta", 7), ("alpha", 8), ("alpha", 8)]):
        run = build_workload(f"r{i}", project, gpus, min_runtime=HOUR)
        sched.add_running(run, {f"n{i}": gpus}, NOW - 2 * HOUR)
    sched.submit(build_workload("a-gang", "alpha", 16, nodes=2, submit=NOW))
    sched.cycle(NOW, {}, explain=True)
    reason = sched.cycle(NOW + 31 * MINUTE, {}, explain=True).reasons["a-gang"]
    assert "no nodes are cleared for it: its project already runs at least its entitlement" in (
        reason
    ), reason
    assert "needs more nodes than may be held at once (0, 0 % of healthy nodes)" in reason, reason


def test_a_reason_names_the_rank_of_each_level_above_the_project():
    # p1's projects used 400 of the window for half the cluster, p2's one project 1,000:
    # p1 ranks first, so a1's work stands before b1's although a1 ranks last in p1. Said
    # with a1's own rank alone ("rank 2 of 2"), its first place had nothing to explain it.
    root = budget(
        "root",
        100,
        budget("p1", 50, leaf("a1", 50), leaf("a2", 50)),
        budget("p2", 50, leaf("b1", 100)),
    )
    sched = build_scheduler(build_nodes(2), root)
    # Every project holds its entitlement (4, 4 and 8 of 16 GPUs): none is served first
    # by the guarantee, so the window alone orders the queue.
    for wid, project, gpus, node in (
        ("a1-run", "a1", 4, "n0"),
        ("a2-run", "a2", 4, "n0"),
        ("b1-run", "b1", 8, "n1"),
    ):
        sched.add_running(
            build_workload(wid, project, gpus, min_runtime=8 * HOUR), {node: gpus}, NOW
        )
    sched.submit(build_workload("b1-next", "b1", 4, submit=NOW - HOUR))
    sched.submit(build_workload("a1-next", "a1", 4, submit=NOW))
    result = sched.cycle(NOW, {"a1": 300.0, "a2": 100.0, "b1": 1000.0}, explain=True)
    assert result.order == ["a1-next", "b1-next"]
    assert (
        "(rank 2 of 2 in program p1; program p1 ranks 1 of 2 in organization root)"
        in result.reasons["a1-next"]
    )
    # A level with one child ranks nothing: b1 is told its program's rank only.
    assert (
        "(rank 1 of 1 in program p2; program p2 ranks 2 of 2 in organization root)"
        in result.reasons["b1-next"]
    )
