"""Timeline and delivery figures: asserted on figure data, not HTML."""

from scheduler.simulator import ReplayConfig, compute_metrics, replay
from scheduler.simulator.report import write_timeline
from scheduler.simulator.timeline import (
    PLOTLY_JS,
    Window,
    choose_window,
    delivery_figure,
    timeline_figure,
)
from tests.simulator.fakes import scripted
from tests.simulator.scenarios import T0, trace, two_teams


def bars(fig, name, hatched):
    shape = "/" if hatched else ""
    return [
        t
        for t in fig.data
        if t.type == "bar" and t.name == name and t.marker.pattern.shape == shape
    ]


def test_runs_are_solid_while_protected_and_hatched_once_preemptible():
    # a1: 8 GPUs for 2 h (minimum 2 h: protected throughout); b1: 2 GPUs for 1 h from 02:00
    # (debug, minimum 15 min: protected 15 min, then preemptible).
    result = replay(
        trace("a1,0,7200,8,A,,", "b1,0,3600,2,B,,"),
        two_teams(),
        ReplayConfig(gpus=8, policy="fifo"),
    )
    fig = timeline_figure(result, Window(T0, T0 + 4 * 3600, "test"))
    [a_solid] = bars(fig, "A", False)
    assert bars(fig, "A", True) == []
    assert sorted(a_solid.y) == list(range(8))  # one bar per GPU row
    assert set(a_solid.base) == {T0 * 1000} and set(a_solid.x) == {7200 * 1000}
    [b_solid] = bars(fig, "B", False)
    [b_hatched] = bars(fig, "B", True)
    assert list(b_solid.x) == [900 * 1000] * 2
    assert list(b_hatched.base) == [(T0 + 7200 + 900) * 1000] * 2
    assert list(b_hatched.x) == [2700 * 1000] * 2
    assert b_solid.marker.color == a_solid.marker.color or b_solid.marker.color != ""
    assert not [t for t in fig.data if t.name == "preempted"]


def test_preempted_runs_are_marked_where_they_stopped():
    t = trace("long,0,10800,4,A,,", "poke,3000,60,1,B,,")
    result = replay(
        t, two_teams(), ReplayConfig(gpus=8), scheduler_factory=scripted({T0 + 3000: ["long"]})
    )
    fig = timeline_figure(result, Window(T0, T0 + 86400, "test"))
    [marks] = [t for t in fig.data if t.name == "preempted"]
    assert list(marks.x) == [(T0 + 3000) * 1000] * 4
    assert list(marks.text) == ["long"] * 4


def test_the_window_clips_bars_and_the_default_is_the_busiest_span():
    rows = [f"early{i},{i * 60},600,1,A,," for i in range(3)] + [
        f"busy{i},{86400 * 3 + i},7200,8,B,," for i in range(4)
    ]
    result = replay(trace(*rows), two_teams(), ReplayConfig(gpus=8, policy="fifo"))
    window = choose_window(result, 86400)
    assert window.start == T0 + 86400 * 3  # the hour the big jobs queue up
    fig = timeline_figure(result, Window(T0 + 86400 * 3 + 3600, T0 + 86400 * 3 + 7200, "x"))
    [b] = bars(fig, "B", False)
    assert set(b.base) == {(T0 + 86400 * 3 + 3600) * 1000}  # clipped at the window's start
    assert set(b.x) == {3600 * 1000}
    assert bars(fig, "A", False) == []  # outside the window


def test_delivery_figure_shows_owed_and_delivered_per_budgeted_team():
    result = replay(
        trace("a1,0,7200,8,A,,", "b1,0,3600,2,B,,", "x,0,60,1,X,,"),
        two_teams(),
        ReplayConfig(gpus=8, policy="fifo"),
    )
    fig = delivery_figure(compute_metrics(result))
    owed, delivered, burst = fig.data
    assert list(owed.x) == ["A", "B"]  # X is unbudgeted: not shown
    assert list(owed.y) == [8.0, 6.0]
    assert list(delivered.y) == [8.0, 2.0]
    assert list(delivered.text) == ["100 %", "33 %"]
    assert list(burst.y) == [8.0, 0.0]


def test_the_page_loads_plotly_from_a_file_beside_it_never_a_cdn(tmp_path):
    result = replay(
        trace("a1,0,7200,8,A,,", "b1,0,3600,2,B,,"),
        two_teams(),
        ReplayConfig(gpus=8, policy="fifo"),
    )
    page = write_timeline(tmp_path / "timeline.html", [(result, compute_metrics(result))])
    text = page.read_text()
    assert f"<script src='{PLOTLY_JS}'></script>" in text
    assert "cdn" not in text.lower()
    assert (tmp_path / PLOTLY_JS).stat().st_size > 1_000_000
    assert "The timeline shows only" in text
