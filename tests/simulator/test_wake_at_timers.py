"""``ReplayConfig.wake_at_timers``: a decision that waits only for time to pass is taken when
its time comes, as the live loop's cycles every few seconds take it, not at the next event or
periodic cycle.

Scenario (8 GPUs on one node, teams A and B at 50 %: 4 GPUs entitled each; ``fairshare``):
``b1`` and ``b2`` (B, 4 GPUs each, 2 h, 10-minute minimum runtime) start at 00:00 on an idle
cluster. ``d1`` (A, 1 GPU, 5 min, 10-minute minimum runtime: debug-class) arrives at 00:16:40,
when both may be reclaimed. An eviction would lose 1,000 s of a 4-GPU run plus the 300 s
restart, 5,200 s of ``d1``'s one GPU: more than ``d1``'s own minimum runtime, so ``d1`` waits
600 s (its patience) before it evicts. Nothing else happens until ``b1`` and ``b2`` end.

Without the option the periodic cycles after ``d1``'s arrival come 60, 120, 240 and 480 s
apart (each fruitless one doubles the gap): at 00:17:40, 00:19:40, 00:23:40 and 00:31:40, so
``d1`` starts at the first after its patience ends, 900 s after it arrived. With it, the
replay wakes when the patience ends: 600 s.
"""

import pytest

from scheduler.simulator import ReplayConfig, replay
from tests.simulator.scenarios import trace, two_teams

ROWS = ("b1,0,7200,4,B,600,", "b2,0,7200,4,B,600,", "d1,1000,300,1,A,600,")


@pytest.mark.parametrize(("wake", "wait"), [(False, 900.0), (True, 600.0)])
def test_a_patience_ends_on_time_when_the_replay_wakes_at_timers(wake, wait):
    config = ReplayConfig(gpus=8, policy="fairshare", wake_at_timers=wake)
    result = replay(trace(*ROWS), two_teams(), config)
    jobs = {job.id: job for job in result.jobs}
    assert jobs["d1"].first_start - jobs["d1"].submit == wait
    evicted = [(result.jobs[p.job].id, p.by) for p in result.preemptions]
    assert evicted in ([("b1", "d1")], [("b2", "d1")])
