"""Fair-share order (``docs/design.md``, "Entitlement first, then the window"), hand-worked.

Siblings are ranked by usage-share / share, lowest first (the furthest below budget goes
first); projects are ordered by the depth-first walk of that ranking; unbudgeted projects
come after every budgeted one; inside a project: priority (higher first), then the shorter
minimum runtime, then submit time.

Every scenario blocks the only node with a protected run of an unbudgeted project, so that
nothing can start or preempt and ``CycleResult.order`` is the pure ranking of the queue.
"""

from __future__ import annotations

from scheduler.engine import BudgetNode
from tests.engine.conftest import (
    HOUR,
    MINUTE,
    budget,
    build_nodes,
    build_scheduler,
    build_workload,
    leaf,
)

NOW = 10 * HOUR


def queue_order(root: BudgetNode | None, usage: dict[str, float], workloads) -> list[str]:
    """The fair-share order of ``workloads`` on a cluster where nothing can start."""
    sched = build_scheduler(build_nodes(1), root)
    # The blocker: a protected 8-GPU run of a project in no leaf (so it is never a victim).
    sched.add_running(
        build_workload("blocker", "ops-unbudgeted", 8, min_runtime=8 * HOUR), {"n0": 8}, NOW
    )
    for w in workloads:
        sched.submit(w)
    result = sched.cycle(NOW, usage, explain=True)
    assert result.starts == [] and result.preemptions == []
    return result.order


def one_each(*projects: str):
    """One identical workload per project, named after it, all submitted at once."""
    return [build_workload(f"w-{p}", p, 4, submit=0.0) for p in projects]


# ---------------------------------------------------------------- Slurm's Fair Tree example
#
# Source: Slurm documentation, "Fair Tree Fairshare Algorithm" (doc/html/fair_tree.shtml in
# SchedMD/slurm; https://slurm.schedmd.com/fair_tree.html), "Overview for End Users". Its
# example tree is
#     root => Acct1 => Acct12 => UserA
#     root => Acct1 => Acct16 => UserB
# and its rule: UserB ranks above UserA exactly when Acct16 ranks above Acct12 at the level
# below their first common ancestor (Acct1), whatever the users' own figures. The doc's
# Level FS is LF = S / U (normalised shares / normalised usage, higher first), i.e. our
# usage-share / share, lower first. The doc gives no numbers; ours are chosen and worked by
# hand below.


def slurm_example_tree() -> BudgetNode:
    return budget(
        "root",
        100,
        budget("Acct1", 100, budget("Acct12", 50, "UserA"), budget("Acct16", 50, "UserB")),
    )


def test_slurm_fair_tree_example_userb_first_when_acct16_is_further_below_budget():
    # Acct12: usage-share 3000/4000 = 0.75, share 0.5 -> 1.5
    # Acct16: usage-share 1000/4000 = 0.25, share 0.5 -> 0.5  (lower: goes first)
    usage = {"UserA": 3000.0, "UserB": 1000.0}
    assert queue_order(slurm_example_tree(), usage, one_each("UserA", "UserB")) == [
        "w-UserB",
        "w-UserA",
    ]


def test_slurm_fair_tree_example_usera_first_when_acct12_is_further_below_budget():
    # Acct12: 500/2500 = 0.2 / 0.5 = 0.4 ; Acct16: 2000/2500 = 0.8 / 0.5 = 1.6
    usage = {"UserA": 500.0, "UserB": 2000.0}
    assert queue_order(slurm_example_tree(), usage, one_each("UserA", "UserB")) == [
        "w-UserA",
        "w-UserB",
    ]


def test_fair_tree_two_level_worked_example_is_the_depth_first_walk_of_sibling_rankings():
    # root
    # |- Acct1 40 %: Acct12 50 % (u12a 50 %, u12b 50 %), Acct16 50 % (u16 100 %)
    # |- Acct2 60 %: u2a 70 %, u2b 30 %
    # usage: u12a 100, u12b 300, u16 600, u2a 2000, u2b 0  (total 3000)
    # root level: Acct1 (1000/3000)/0.4 = 0.833 ; Acct2 (2000/3000)/0.6 = 1.111 -> Acct1 first
    # in Acct1:   Acct12 (400/1000)/0.5 = 0.8   ; Acct16 (600/1000)/0.5 = 1.2   -> Acct12 first
    # in Acct12:  u12a (100/400)/0.5 = 0.5      ; u12b (300/400)/0.5 = 1.5      -> u12a first
    # in Acct2:   u2a (2000/2000)/0.7 = 1.43    ; u2b 0/0.3 = 0             -> u2b first
    # u2b has no usage at all, yet every project under Acct1 goes before it.
    root = budget(
        "root",
        100,
        budget(
            "Acct1",
            40,
            budget("Acct12", 50, leaf("u12a", 50), leaf("u12b", 50)),
            budget("Acct16", 50, "u16"),
        ),
        budget("Acct2", 60, leaf("u2a", 70), leaf("u2b", 30)),
    )
    usage = {"u12a": 100.0, "u12b": 300.0, "u16": 600.0, "u2a": 2000.0, "u2b": 0.0}
    order = queue_order(root, usage, one_each("u2a", "u16", "u12b", "u2b", "u12a"))
    assert order == ["w-u12a", "w-u12b", "w-u16", "w-u2b", "w-u2a"]


# ---------------------------------------------------------------- sibling ranking


def test_siblings_ranked_by_usage_share_over_share_not_by_raw_usage():
    # big: 600/1000 = 0.6 / 0.75 = 0.8 ; small: 400/1000 = 0.4 / 0.25 = 1.6
    # "big" used more GPU-hours but is further below its budget: it goes first.
    root = budget("root", 100, leaf("big", 75), leaf("small", 25))
    usage = {"big": 600.0, "small": 400.0}
    assert queue_order(root, usage, one_each("small", "big")) == ["w-big", "w-small"]


def test_sibling_with_no_usage_goes_before_siblings_that_used_their_share():
    root = budget("root", 100, leaf("a", 30), leaf("b", 30), leaf("c", 40))
    # a: 0 ; b: (500/1000)/0.3 = 1.67 ; c: (500/1000)/0.4 = 1.25
    usage = {"a": 0.0, "b": 500.0, "c": 500.0}
    assert queue_order(root, usage, one_each("b", "c", "a")) == ["w-a", "w-c", "w-b"]


def test_every_workload_of_a_higher_ranked_team_precedes_every_workload_of_its_sibling():
    # teamA (under budget) has low-priority, late, long workloads; teamB (over budget) has
    # high-priority, early, debug workloads. Priority only orders a project's own work.
    root = budget(
        "root",
        100,
        budget("teamA", 50, leaf("a1", 50), leaf("a2", 50)),
        budget("teamB", 50, leaf("b1", 50), leaf("b2", 50)),
    )
    # teamA (100/1000)/0.5 = 0.2 ; teamB (900/1000)/0.5 = 1.8
    usage = {"a1": 50.0, "a2": 50.0, "b1": 450.0, "b2": 450.0}
    workloads = [
        build_workload("b1-debug", "b1", 1, submit=0.0, min_runtime=15 * MINUTE, priority=9),
        build_workload("b2-debug", "b2", 1, submit=1.0, min_runtime=15 * MINUTE, priority=9),
        build_workload("b1-train", "b1", 8, submit=2.0, min_runtime=2 * HOUR, priority=5),
        build_workload("a1-train", "a1", 8, submit=500.0, min_runtime=8 * HOUR, priority=-5),
        build_workload("a2-train", "a2", 8, submit=600.0, min_runtime=8 * HOUR, priority=-5),
        build_workload("a2-eval", "a2", 2, submit=700.0, min_runtime=2 * HOUR, priority=-9),
    ]
    order = queue_order(root, usage, workloads)
    team_a = {"a1-train", "a2-train", "a2-eval"}
    team_b = {"b1-debug", "b2-debug", "b1-train"}
    assert set(order) == team_a | team_b
    assert set(order[:3]) == team_a
    assert set(order[3:]) == team_b


def test_budgeted_projects_go_before_unbudgeted_ones_however_far_over_budget():
    root = budget("root", 100, leaf("funded", 100))
    # "funded" used everything; "stray" (in no leaf) used nothing and submitted first.
    usage = {"funded": 1_000_000.0}
    workloads = [
        build_workload("stray-1", "stray", 1, submit=0.0, min_runtime=15 * MINUTE, priority=9),
        build_workload("funded-1", "funded", 8, submit=900.0, min_runtime=8 * HOUR),
    ]
    assert queue_order(root, usage, workloads) == ["funded-1", "stray-1"]


# ---------------------------------------------------------------- inside a project


def test_inside_a_project_priority_then_shorter_min_runtime_then_submit_time():
    root = budget("root", 100, leaf("p", 100))
    workloads = [
        build_workload("long-early", "p", 4, submit=10.0, min_runtime=2 * HOUR),
        build_workload("debug-later", "p", 4, submit=20.0, min_runtime=15 * MINUTE),
        build_workload("urgent-long", "p", 4, submit=30.0, min_runtime=8 * HOUR, priority=5),
        build_workload("debug-earliest", "p", 4, submit=5.0, min_runtime=15 * MINUTE),
        build_workload("long-latest", "p", 4, submit=40.0, min_runtime=2 * HOUR),
    ]
    assert queue_order(root, {"p": 100.0}, workloads) == [
        "urgent-long",
        "debug-earliest",
        "debug-later",
        "long-early",
        "long-latest",
    ]


def test_project_priority_does_not_lift_a_workload_above_another_projects_work():
    root = budget("root", 100, leaf("low", 50), leaf("high", 50))
    # low: 0.1/0.5 = 0.2 first ; high: 0.9/0.5 = 1.8
    usage = {"low": 100.0, "high": 900.0}
    workloads = [
        build_workload("high-top", "high", 1, priority=100, min_runtime=15 * MINUTE),
        build_workload("low-bottom", "low", 8, priority=-100, min_runtime=8 * HOUR, submit=99.0),
    ]
    assert queue_order(root, usage, workloads) == ["low-bottom", "high-top"]
