"""The bounds ``tests.bench.debug_waits`` prints for debug-class waits, on cases worked by hand.

Scenario (8 GPUs, teams A and B at 50 %: 4 GPUs entitled each; fifo): ``b1`` (B, 8 GPUs,
2 h) and three debug jobs of A, ``a1``-``a3`` (2 GPUs, 10 min each), all submitted at 00:00.
B asks for 8 GPUs for its first two hours in any schedule (``b1`` cannot end sooner), so it
is owed its whole entitlement, 4, and A's debug jobs can have the other 4 at most: ``a1``
and ``a2`` start at once, ``a3`` once one of them ends, 600 s later. Waits 0, 0, 600: p90
(nearest rank) 600 s. Without ``b1``, all eight GPUs are A's to use: p90 0.
"""

from types import SimpleNamespace

from scheduler.simulator import ReplayConfig, replay
from tests.bench.debug_waits import _on_spare_capacity, _queue_waits_on
from tests.simulator.scenarios import trace, two_teams

DEBUG_ROWS = ("a1,0,600,2,A,,", "a2,0,600,2,A,,", "a3,0,600,2,A,,")


def _bound(rows, as_replayed: bool) -> float:
    budgets = two_teams()
    result = replay(trace(*rows), budgets, ReplayConfig(gpus=8, policy="fifo"))
    debug = [j for j in result.jobs if j.debug]
    assert sorted(j.id for j in debug) == ["a1", "a2", "a3"]
    window = {j.id for j in debug}
    return _on_spare_capacity(result, debug, window, budgets, 8, as_replayed=as_replayed)


def test_another_team_asking_for_more_than_its_entitlement_is_owed_only_that():
    rows = ("b1,0,7200,8,B,,", *DEBUG_ROWS)
    assert _bound(rows, as_replayed=False) == 600.0
    # In the replay B asked for 8 GPUs in hours 0 and 1 too (b1 ran first, fifo).
    assert _bound(rows, as_replayed=True) == 600.0


def test_with_no_other_team_asking_every_gpu_is_the_debug_jobs():
    assert _bound(DEBUG_ROWS, as_replayed=False) == 0.0
    assert _bound(DEBUG_ROWS, as_replayed=True) == 0.0


def _job(jid: str, submit: float, duration: float, gpus: int):
    return SimpleNamespace(id=jid, submit=submit, duration=duration, gpus=gpus)


def test_a_falling_capacity_stops_nothing_and_starts_nothing_until_it_grows():
    # 2 GPUs until t=3, none until t=20, then 2 again. x (2 GPUs, 10 s) starts at 0 and
    # runs on past t=3; y (1 GPU) arrives at 4, finds no capacity when x ends at 10, and
    # starts at 20: a wait of 16.
    steps = [(0.0, 2), (3.0, 0), (20.0, 2)]
    jobs = [_job("x", 0.0, 10.0, 2), _job("y", 4.0, 1.0, 1)]
    for shortest_first in (False, True):
        assert _queue_waits_on(jobs, steps, shortest_first) == {"x": 0.0, "y": 16.0}


def test_nobody_passes_a_head_that_does_not_fit_in_either_order():
    # 1 GPU until t=10, then 2. a (1 GPU, 5 s) starts at 0. In submit order b (1 GPU,
    # 5 s, at 1) is next: it starts at 5 and waits 4, then c (2 GPUs, 1 s, at 2) starts at
    # 10, once b has ended and the capacity grew: 8. Shortest first, c is the head from
    # t=5 and fits only at 10 (wait 8); b waits behind it until c ends at 11: 10.
    steps = [(0.0, 1), (10.0, 2)]
    jobs = [_job("a", 0.0, 5.0, 1), _job("b", 1.0, 5.0, 1), _job("c", 2.0, 1.0, 2)]
    assert _queue_waits_on(jobs, steps, False) == {"a": 0.0, "b": 4.0, "c": 8.0}
    assert _queue_waits_on(jobs, steps, True) == {"a": 0.0, "b": 10.0, "c": 8.0}
