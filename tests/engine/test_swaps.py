"""What the engine remembers of a swap: a workload evicted by running work of its own project.

While the work that took its place runs, the swapped-out workload's GPUs count towards its
team's claim on other teams' GPUs (``docs/design.md``, "Why this cannot ping-pong"). A driver
that rebuilds the engine passes the swap back (``Workload.swapped_for``), for a workload that
waits and for one whose run is still stopping (``Scheduler.add_stopping``).
"""

from __future__ import annotations

import dataclasses

from tests.engine.conftest import budget, build_nodes, build_scheduler, build_workload, leaf

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
