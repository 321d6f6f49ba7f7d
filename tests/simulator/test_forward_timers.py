"""The queue page's estimate takes a decision that waits only for time to pass when its time
comes (``Scheduler.next_timer``), as the live loop does, not at its next periodic step.

Scenario (as in ``test_wake_at_timers``: 8 GPUs on one node, teams A and B at 50 %,
``fairshare``): ``b1`` and ``b2`` (B, 4 GPUs each, 2 h, 10-minute minimum runtime) start at
00:00. ``d1`` (A, 1 GPU, debug-class) arrives at 00:16:40, when both may be reclaimed; an
eviction would lose more than ``d1``'s own 600 s minimum runtime, so ``d1`` waits that long
(its patience) before it evicts: it starts at 00:26:40, 1,600 s after the start.

The replay wakes at the engine's timers, so ``d1`` really starts then. The estimate made at
its submission, from the engine rebuilt as the page rebuilds it, must say the same. Stepping
only every 15 minutes of virtual time (and at finishes and minimum-runtime ends, none of which
falls between), it said 00:31:40.
"""

from scheduler.simulator import ReplayConfig
from scheduler.simulator.estimate_error import estimate_errors
from tests.simulator.scenarios import trace, two_teams

ROWS = ("b1,0,7200,4,B,600,", "b2,0,7200,4,B,600,", "d1,1000,300,1,A,600,")


def test_the_estimate_wakes_when_a_patience_ends():
    config = ReplayConfig(gpus=8, policy="fairshare", wake_at_timers=True, record_runs=False)
    samples, _ = estimate_errors(trace(*ROWS), two_teams(), config)
    (debug,) = [s for s in samples if s.job == "d1"]
    assert debug.actual - debug.submit == 600.0
    assert debug.estimate == debug.actual
