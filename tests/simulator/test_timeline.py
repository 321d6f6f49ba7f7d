"""Timeline and delivery figures: asserted on figure data, not HTML."""

from scheduler.simulator import ReplayConfig, compute_metrics, replay
from scheduler.simulator.report import write_timeline
from scheduler.simulator.timeline import (
    PLOTLY_JS,
    TIMELINE_COLUMNS,
    Window,
    choose_window,
    delivery_figure,
    hover_labels,
    timeline_cell_seconds,
    timeline_figure,
)
from tests.page_assets import off_site_assets
from tests.simulator.fakes import scripted
from tests.simulator.scenarios import T0, trace, two_teams


def cells(fig) -> dict[int, list[str | None]]:
    """Each GPU row of the timeline as its cells' labels (None: idle)."""
    [heatmap] = [t for t in fig.data if t.type == "heatmap"]
    labels = heatmap.meta["labels"]
    return {
        row: [None if code is None else labels[code] for code in codes]
        for row, codes in enumerate(heatmap.z)
    }


def test_runs_are_full_colour_while_protected_and_pale_once_preemptible():
    # a1: 8 GPUs for 2 h (minimum 2 h: protected throughout); b1: 2 GPUs for 1 h from 02:00
    # (debug, minimum 15 min: protected 15 min, then preemptible). A 4-hour window: 240
    # one-minute cells.
    result = replay(
        trace("a1,0,7200,8,A,,", "b1,0,3600,2,B,,"),
        two_teams(),
        ReplayConfig(gpus=8, policy="fifo"),
    )
    window = Window(T0, T0 + 4 * 3600, "test")
    assert timeline_cell_seconds(window) == 60
    fig = timeline_figure(result, window)
    rows = cells(fig)
    b_rows = [row for row in rows if rows[row][120] is not None]
    assert len(b_rows) == 2  # b1 holds two GPUs once a1 has ended
    for row in range(8):
        assert rows[row][:120] == ["A, protected"] * 120  # one row per GPU
        if row in b_rows:
            assert rows[row][120:135] == ["B, protected"] * 15
            assert rows[row][135:180] == ["B, preemptible"] * 45
            assert rows[row][180:] == [None] * 60
        else:
            assert rows[row][120:] == [None] * 120
    [heatmap] = [t for t in fig.data if t.type == "heatmap"]
    scale = dict((round(stop * 3), colour) for stop, colour in heatmap.colorscale)
    assert len(set(scale.values())) == 3  # A, B protected, B preemptible: three colours
    assert {t.name for t in fig.data if t.type == "scatter"} == {"A", "B"}  # the legend
    assert not [t for t in fig.data if t.name == "preempted"]


def test_a_cell_takes_the_team_that_held_the_gpu_longest_in_it():
    # Three short runs share one GPU inside one 10-minute cell: 4 minutes of B, 3 of A (the
    # middle of the cell), 3 of B again. B held it longest.
    result = replay(
        trace("b1,0,240,1,B,,", "a,240,180,1,A,,", "b2,420,180,1,B,,"),
        two_teams(),
        ReplayConfig(gpus=1, gpus_per_node=1, policy="fifo"),
    )
    window = Window(T0, T0 + 240 * 600, "test")
    assert timeline_cell_seconds(window) == 600
    assert cells(timeline_figure(result, window))[0][0] == "B, protected"


def test_preempted_runs_are_marked_where_they_stopped():
    t = trace("long,0,10800,4,A,,", "poke,3000,60,1,B,,")
    result = replay(
        t, two_teams(), ReplayConfig(gpus=8), scheduler_factory=scripted({T0 + 3000: ["long"]})
    )
    fig = timeline_figure(result, Window(T0, T0 + 86400, "test"))
    [marks] = [t for t in fig.data if t.name == "preempted"]
    assert list(marks.x) == [(T0 + 3000) * 1000] * 4
    assert list(marks.text) == ["long"] * 4


def test_the_window_clips_runs_and_the_default_is_the_busiest_span():
    rows = [f"early{i},{i * 60},600,1,A,," for i in range(3)] + [
        f"busy{i},{86400 * 3 + i},7200,8,B,," for i in range(4)
    ]
    result = replay(trace(*rows), two_teams(), ReplayConfig(gpus=8, policy="fifo"))
    window = choose_window(result, 86400)
    assert window.start == T0 + 86400 * 3  # the hour the big jobs queue up
    # One hour into the first busy job's run, for an hour: it fills every cell of the window.
    fig = timeline_figure(result, Window(T0 + 86400 * 3 + 3600, T0 + 86400 * 3 + 7200, "x"))
    assert all(labels == ["B, protected"] * 60 for labels in cells(fig).values())
    assert "A" not in {t.name for t in fig.data}  # outside the window


def test_hover_labels_name_every_cell_for_the_file_the_cli_writes():
    result = replay(
        trace("a1,0,7200,8,A,,", "b1,0,3600,2,B,,"),
        two_teams(),
        ReplayConfig(gpus=8, policy="fifo"),
    )
    fig = hover_labels(timeline_figure(result, Window(T0, T0 + 4 * 3600, "test")))
    [heatmap] = [t for t in fig.data if t.type == "heatmap"]
    assert [list(row) for row in heatmap.text] == [
        ["" if label is None else label for label in labels] for labels in cells(fig).values()
    ]


def test_the_timeline_is_one_image_whatever_the_number_of_runs():
    # A thousand runs draw as one heatmap of fixed size, not an element per run: the page's
    # first draw does not grow with the window's runs.
    rows = [f"j{i},{i * 30},600,1,{'A' if i % 2 else 'B'},," for i in range(1000)]
    result = replay(trace(*rows), two_teams(), ReplayConfig(gpus=8, policy="fifo"))
    fig = timeline_figure(result, Window(T0, T0 + 86400, "test"))
    assert [t.type for t in fig.data if t.type != "scatter"] == ["heatmap"]
    assert all(len(t.x) <= 1 for t in fig.data if t.type == "scatter" and t.name != "preempted")
    [heatmap] = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmap.z) == 8 and {len(row) for row in heatmap.z} == {TIMELINE_COLUMNS}


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
    assert off_site_assets(text) == []
    assert (tmp_path / PLOTLY_JS).stat().st_size > 1_000_000
    assert "The timeline shows only" in text
