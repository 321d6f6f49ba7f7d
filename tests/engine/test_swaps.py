"""What the engine remembers of a swap: a workload evicted by running work of its own project.

While the work that took its place runs, the swapped-out workload's GPUs count towards its
team's claim on other teams' GPUs (``docs/design.md``, "Why this cannot ping-pong"). A driver
that rebuilds the engine passes the swap back (``Workload.swapped_for``), for a workload that
waits and for one whose run is still stopping (``Scheduler.add_stopping``).
"""

from __future__ import annotations

import dataclasses

from tests.engine.conftest import (
    budget,
    build_nodes,
    build_scheduler,
    build_workload,
    leaf,
    preempted_ids,
    started_ids,
)

HALVES = budget("root", 100, leaf("alpha", 50), leaf("beta", 50))


def swapped(workload, by: str):
    """``workload`` as a driver passes it back after ``by`` swapped it out."""
    return dataclasses.replace(workload, swapped_for=by)


def test_a_swap_counts_only_while_the_swapper_of_the_same_project_runs():
    sched = build_scheduler(build_nodes(2), HALVES)
    sched.add_running(build_workload("debug", "alpha", 1, min_runtime=600), {"n0": 1}, 0.0)
    sched.add_running(build_workload("other", "beta", 2), {"n1": 2}, 0.0)
    sched.submit(swapped(build_workload("train", "alpha", 4), "debug"))
    sched.submit(swapped(build_workload("beta-run", "beta", 3), "debug"))  # not its project
    sched.submit(swapped(build_workload("gone", "alpha", 2), "nobody"))  # swapper not running

    assert sched.swapped_gpus() == {"alpha": 4}

    sched.finish("debug")
    assert sched.swapped_gpus() == {}


def test_a_swap_ends_when_the_swapped_out_workload_starts_again():
    sched = build_scheduler(build_nodes(1, 8), HALVES)
    sched.add_running(build_workload("debug", "alpha", 1, min_runtime=600), {"n0": 1}, 0.0)
    sched.submit(swapped(build_workload("train", "alpha", 4), "debug"))
    assert sched.swapped_gpus() == {"alpha": 4}

    result = sched.cycle(60.0, {})

    assert [s.workload_id for s in result.starts] == ["train"]
    assert sched.swapped_gpus() == {}


def test_a_run_still_stopping_after_a_swap_counts_and_survives_a_rebuild():
    sched = build_scheduler(build_nodes(2), HALVES)
    sched.add_running(build_workload("debug", "alpha", 1, min_runtime=600), {"n0": 1}, 0.0)
    sched.add_stopping(swapped(build_workload("train", "alpha", 4), "debug"))
    sched.add_stopping(build_workload("drained", "alpha", 2))  # no swap: nothing to count

    assert sched.swapped_gpus() == {"alpha": 4}
    assert sched.rebuilt().swapped_gpus() == {"alpha": 4}
    assert "train" not in sched.pending_ids() and "train" not in sched.running

    sched.finish("debug")
    assert sched.swapped_gpus() == {}


def test_a_swapped_out_workload_that_starts_again_is_counted_once_in_the_same_cycle():
    """Hand-worked: 16 GPUs, alpha and beta entitled to 8 each. beta runs 12 (4 above its
    entitlement, past their protection); alpha runs a debug job that swapped out its own
    2-GPU ``train``, and waits with a 4-GPU ``eval`` too. In one cycle ``train`` starts again
    on free GPUs (alpha: 3 of 8), and ``eval`` may still reclaim from beta: 3 + 4 is within
    alpha's 8. Counting ``train`` both as running and as swapped out (5 + 4 > 8) made
    ``eval`` wait a cycle for nothing."""
    sched = build_scheduler(build_nodes(2), HALVES)
    sched.add_running(build_workload("b0", "beta", 4), {"n0": 4}, 0.0)
    sched.add_running(build_workload("b1", "beta", 4), {"n0": 4}, 0.0)
    sched.add_running(build_workload("b2", "beta", 4), {"n1": 4}, 0.0)
    sched.add_running(build_workload("debug", "alpha", 1, min_runtime=600), {"n1": 1}, 100_000.0)
    sched.submit(swapped(build_workload("train", "alpha", 2), "debug"))
    sched.submit(build_workload("eval", "alpha", 4, submit=1.0))

    result = sched.cycle(100_060.0, {"beta": 1e6})

    assert sorted(started_ids(result)) == ["eval", "train"]
    (victim,) = preempted_ids(result)
    assert victim in {"b0", "b1", "b2"}  # any one leaves beta at its entitlement
    assert sched.swapped_gpus() == {}
