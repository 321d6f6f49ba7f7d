"""A proposal that moves share from team X to team Y never lowers what Y is delivered of
what it is owed when Y has pending demand: the two replays of a what-if, on constructed traces (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.selectors.whatif import _team_figures
from scheduler.simulator import ReplayConfig, replay
from tests.simulator.scenarios import trace, two_teams

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
def test_moving_share_to_a_team_with_demand_never_lowers_what_it_gets(
    x_jobs, y_jobs, y_share, moved
):
    # Y asks for the whole 16-GPU cluster from T0 on, for longer than anything else lasts:
    # it has pending demand throughout.
    rows = [f"y-wall-{i},0,{12 * 3600},8,B,3600," for i in range(2)]
    rows += [f"x{i},{s},{d},{g},A,1800," for i, (s, d, g) in enumerate(x_jobs)]
    rows += [f"y{i},{s},{d},{g},B,1800," for i, (s, d, g) in enumerate(y_jobs)]
    t = trace(*rows)
    moved = min(moved, 100 - y_share - 1)
    config = ReplayConfig(gpus=16, record_runs=False)
    today = _team_figures(replay(t, two_teams(100 - y_share, y_share), config))
    proposed = _team_figures(replay(t, two_teams(100 - y_share - moved, y_share + moved), config))
    # What Y was delivered of what it was owed, hour by hour (rounded to 0.01 GPU-hour).
    before, after = today["B"], proposed["B"]
    assert after.delivered_of_owed_gpu_hours >= before.delivered_of_owed_gpu_hours - 0.01
