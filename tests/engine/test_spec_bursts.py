"""A debug job's place in its submitter's burst (``docs/design.md``, "Inside a project").

A project's order is priority, then minimum runtime, then, for debug-class work, its burst
rank (how many debug-class jobs its submitter sent to the project in the 30 minutes before),
then submit time: a colleague's lone debug job is not queued behind a sweep. Worked by hand.
"""

from __future__ import annotations

from scheduler.engine import Workload
from scheduler.engine.bursts import BurstRanker
from tests.engine.conftest import (
    HOUR,
    MINUTE,
    budget,
    build_nodes,
    build_scheduler,
    leaf,
    started_ids,
)

T0 = 1000 * HOUR
DEBUG = 15 * MINUTE


def debug_job(wid: str, submit: float, rank: int) -> Workload:
    return Workload(wid, "alpha", 1, submit, DEBUG, burst_rank=rank)


def test_ranks_count_the_same_submitters_debug_work_in_the_window_before():
    ranker = BurstRanker(30 * MINUTE)
    sweep = [ranker.rank("alpha", "sam", T0 + s, DEBUG) for s in range(4)]
    assert sweep == [0, 1, 2, 3]
    # Another person in the same project, and the same person in another project: fresh.
    assert ranker.rank("alpha", "kim", T0 + 5, DEBUG) == 0
    assert ranker.rank("beta", "sam", T0 + 5, DEBUG) == 0
    # Training work is never ranked, and does not count.
    assert ranker.rank("alpha", "sam", T0 + 6, 2 * HOUR) == 0
    assert ranker.rank("alpha", "sam", T0 + 7, DEBUG) == 4
    # A job submitted exactly 30 minutes before no longer counts; after the last, none does.
    assert ranker.rank("alpha", "sam", T0 + 30 * MINUTE, DEBUG) == 4
    assert ranker.rank("alpha", "sam", T0 + 2 * HOUR, DEBUG) == 0


def sweep_then_lone(policy: str) -> list[str]:
    """One GPU; a sweep of five debug jobs (ranks 0-4), then a colleague's lone one (rank 0)
    ten seconds later. One GPU frees per cycle: the order the six start in."""
    sched = build_scheduler(build_nodes(1, gpus=1), budget("root", 100, leaf("alpha", 100)),
                            policy=policy)  # fmt: skip
    for i in range(5):
        sched.submit(debug_job(f"sweep-{i}", T0 + i, rank=i))
    sched.submit(debug_job("lone", T0 + 10, rank=0))
    order: list[str] = []
    now = T0 + MINUTE
    for _ in range(6):
        (started,) = started_ids(sched.cycle(now, {"alpha": 0.0}))
        order.append(started)
        sched.finish(started)
        now += MINUTE
    return order


def test_a_lone_debug_job_goes_before_the_rest_of_a_sweep():
    # The sweep's first job was submitted first and ranks 0 too: it goes first; then the
    # lone job; then the sweep's others.
    assert sweep_then_lone("fairshare") == [
        "sweep-0", "lone", "sweep-1", "sweep-2", "sweep-3", "sweep-4",
    ]  # fmt: skip


def test_the_quota_baseline_keeps_submit_order():
    assert sweep_then_lone("quota")[-1] == "lone"


def test_a_waiting_sweep_job_says_where_it_stands_in_its_burst():
    sched = build_scheduler(build_nodes(1, gpus=1), budget("root", 100, leaf("alpha", 100)))
    for i in range(3):
        sched.submit(debug_job(f"sweep-{i}", T0 + i, rank=i))
    sched.submit(debug_job("lone", T0 + 10, rank=0))
    result = sched.cycle(T0 + MINUTE, {"alpha": 0.0}, explain=True)
    assert started_ids(result) == ["sweep-0"]
    assert result.order == ["lone", "sweep-1", "sweep-2"]
    assert "job 3 of its submitter's burst of debug work" in result.reasons["sweep-2"]
    assert "job 2 of its submitter's burst of debug work" in result.reasons["sweep-1"]
    assert "burst" not in result.reasons["lone"]
