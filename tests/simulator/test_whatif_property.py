"""What a proposal that moves share from team X to team Y does for Y, replayed (the two
replays of a what-if, on constructed traces).

With pending demand throughout, Y is owed at least as much under the proposal (hypothesis).
What Y is then *delivered* of what it is owed usually rises too, but not always: whole
workloads make the policy not monotone in the share. ``tests.bench.whatif_monotonicity``
counts how often on random traces; the case below is worked by hand. The what-if replays
both trees and shows what happens; it does not assume the better outcome.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.selectors.whatif import _team_figures
from scheduler.simulator import ReplayConfig, replay
from tests.simulator.scenarios import trace, two_teams, whatif_rows

job = st.tuples(
    st.integers(min_value=0, max_value=6 * 3600),  # submit, seconds after T0
    st.integers(min_value=600, max_value=8 * 3600),  # run time needed
    st.sampled_from([1, 2, 4, 8]),  # GPUs
)


@settings(max_examples=60, deadline=None)
@given(
    x_jobs=st.lists(job, min_size=1, max_size=12),
    y_jobs=st.lists(job, min_size=1, max_size=12),
    y_share=st.integers(min_value=10, max_value=50),
    moved=st.integers(min_value=1, max_value=40),
)
def test_moving_share_to_a_team_with_demand_never_lowers_what_it_is_owed(
    x_jobs, y_jobs, y_share, moved
):
    t = trace(*whatif_rows(x_jobs, y_jobs))
    moved = min(moved, 100 - y_share - 1)
    config = ReplayConfig(gpus=16, record_runs=False)
    today = _team_figures(replay(t, two_teams(100 - y_share, y_share), config))
    proposed = _team_figures(replay(t, two_teams(100 - y_share - moved, y_share + moved), config))
    assert proposed["B"].owed_gpu_hours >= today["B"].owed_gpu_hours


def test_a_larger_share_can_start_a_whole_node_run_later():
    """Found by the earlier form of the test above, which asserted that Y's delivered-of-owed
    never falls. Y at 49 % and at 54 % of 16 GPUs; X's 4-GPU run x2, submitted at 00:00:01,
    may reclaim Y's 4-GPU y0 once y0 is past its 30-minute minimum and X stays within its
    entitlement with it.

    At 51 % (8.16 GPUs) X runs x1, x4 and x5 at 1,800 s (4 GPUs): 4 + 4 = 8 fits, and x2
    evicts y0 at once. At 46 % (7.36 GPUs) 8 does not fit, and x2 evicts y0 only at 2,167 s,
    when x1 ends. x2 then runs its 4,967 s from 2,167 s instead of 1,800 s, and Y's second
    8-GPU run, which needs the node x2 is on, starts when x2 ends: at 7,134 s instead of
    6,767 s. Y keeps y0 367 s longer (4 GPUs) but starts 8 GPUs 367 s later: it is owed more
    and delivered less of it."""
    x_jobs = [(0, 600, 1), (0, 2167, 2), (1, 4967, 4), (1, 600, 1), (1, 967, 1), (1, 600, 1)]
    x_jobs.append((3600, 600, 1))
    y_jobs = [(0, 3198, 4), (1, 1609, 1), (0, 1507, 1)]
    t = trace(*whatif_rows(x_jobs, y_jobs))
    runs = {}
    figures = {}
    for y_share in (49, 54):
        result = replay(t, two_teams(100 - y_share, y_share), ReplayConfig(gpus=16))
        starts = {j.id: j for j in result.jobs}
        t0 = result.start_time
        runs[y_share] = (
            starts["y0"].requeues[0][0] - t0,  # y0 evicted
            starts["x2"].first_start - t0,
            starts["y-wall-1"].first_start - t0,
        )
        figures[y_share] = _team_figures(result)["B"]
    assert runs[49] == (1800, 1800, 6767)
    assert runs[54] == (2167, 2167, 7134)
    assert figures[54].owed_gpu_hours > figures[49].owed_gpu_hours
    assert figures[54].delivered_of_owed_gpu_hours < figures[49].delivered_of_owed_gpu_hours
