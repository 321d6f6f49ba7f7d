"""``tests.bench.victim_counts`` counts each preempted workload once and its repeats."""

from types import SimpleNamespace

from scheduler.simulator import ReplayConfig, replay
from scheduler.simulator.replay_records import PreemptionEvent
from tests.bench.victim_counts import victim_counts
from tests.simulator.scenarios import trace, two_teams


def test_a_replays_one_reclaim_is_one_victim():
    # As in test_requeue_waits: on 8 GPUs, team A (below its 4 GPUs) reclaims one of B's two
    # 4-GPU runs once both passed their 10-minute minimum.
    rows = ("b1,0,7200,4,B,600,", "b2,0,7200,4,B,600,", "a1,1000,600,4,A,600,")
    config = ReplayConfig(gpus=8, policy="fairshare", record_runs=True)
    counts = victim_counts(replay(trace(*rows), two_teams(), config))
    assert counts == {
        "preemptions": 1,
        "victims": 1,
        "victims_5_or_more": 0,
        "most_for_one": 1,
        "of_week_long": 0,
    }


def test_repeats_are_counted_per_workload():
    # Job 7 (runs eight days) taken six times, job 3 twice, job 9 once.
    taken = [7, 3, 7, 7, 9, 7, 3, 7, 7]
    events = [PreemptionEvent(float(t), job, "preempt", None, 0.0) for t, job in enumerate(taken)]
    jobs = [SimpleNamespace(duration=8 * 86400.0 if i == 7 else 3600.0) for i in range(10)]
    counts = victim_counts(SimpleNamespace(preemptions=events, jobs=jobs))
    assert counts == {
        "preemptions": 9,
        "victims": 3,
        "victims_5_or_more": 1,
        "most_for_one": 6,
        "of_week_long": 6,
    }
