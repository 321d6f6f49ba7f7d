"""The dashboards' figure builders: data of each figure from hand-made selector rows.

Pure functions, so no database: the rows are the selectors' own dataclasses filled in by hand
with round numbers, and the expected values are written out here. The builders return plain
data; every figure is loaded into ``plotly.graph_objects.Figure`` here (``plotted``), which
refuses any property Plotly does not know, and must serialize exactly as Plotly's own.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import plotly.graph_objects as go
import pytest

from governance import figures_dashboards as builders
from governance.figures import figure_json
from governance.figures_dashboards import amount_tickformat
from governance.selectors.fairshare import FairShareRow
from governance.selectors.health import HealthDay, NodeStateCount
from governance.selectors.usage import UsagePoint, UsageRow


def plotted(figure: dict) -> go.Figure:
    """The builder's plain figure as a checked Plotly figure: every property known to Plotly,
    and ``figure_json`` writes of the plain data exactly what Plotly writes of the figure."""
    checked = go.Figure(figure)
    assert figure_json(figure) == figure_json(checked)
    return checked


def delivery_bars(rows):
    return plotted(builders.delivery_bars(rows))


def delivery_timeseries(points, **kwargs):
    return plotted(builders.delivery_timeseries(points, **kwargs))


def fairshare_lines(instants, rows):
    return plotted(builders.fairshare_lines(instants, rows))


def health_pyramid(days):
    return plotted(builders.health_pyramid(days))


def nodes_by_state_bar(counts):
    return plotted(builders.nodes_by_state_bar(counts))


H = Decimal(3600)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def usage_row(name, owed_h, budgeted_h, burst_h=0, delivered_h=None) -> UsageRow:
    row = UsageRow("project", len(name), name, ("program", 1), 1)
    row.owed_gpu_seconds = H * owed_h
    row.budgeted_gpu_seconds = H * budgeted_h
    row.burst_gpu_seconds = H * burst_h
    charged = budgeted_h + burst_h if delivered_h is None else delivered_h
    row.owed_delivered_gpu_seconds = H * min(charged, owed_h)
    return row


def test_delivery_bars_owed_and_delivered_per_team_with_the_ratio_in_the_label():
    rows = [usage_row("Detection", 100, 80), usage_row("Idle", 0, 0), usage_row("Busy", 50, 40, 30)]
    figure = delivery_bars(rows)
    owed, delivered = figure.data
    assert (owed.name, delivered.name) == ("Owed", "Delivered (charged)")
    assert owed.orientation == "h"
    assert list(owed.y) == ["Detection · 80.0 %", "Idle · nothing owed", "Busy · 100.0 %"]
    assert list(owed.x) == [100.0, 0.0, 50.0]
    assert list(delivered.x) == [80.0, 0.0, 70.0]
    assert list(delivered.customdata) == [80.0, None, 100.0]
    assert figure.layout.barmode == "group"
    assert figure.layout.yaxis.autorange == "reversed"  # first team on top
    assert figure.layout.height == 220  # the minimum: 90 + 34 x 3 is less


def test_delivery_bars_grow_with_the_number_of_teams_and_keep_a_minimum():
    assert delivery_bars([usage_row("A", 1, 1)]).layout.height == 220
    many = [usage_row(f"team {i:02d}", 10, 5) for i in range(40)]
    assert delivery_bars(many).layout.height == 90 + 34 * 40


def test_delivery_timeseries_bars_delivered_and_lines_entitled_and_owed():
    points = [
        UsagePoint(
            start=T0 + timedelta(days=i),
            entitled_gpu_seconds=H * 240,
            owed_gpu_seconds=H * owed,
            delivered_gpu_seconds=H * delivered,
        )
        for i, (owed, delivered) in enumerate([(200, 150), (120, 180), (0, 0)])
    ]
    figure = delivery_timeseries(points, bucket="day")
    delivered, entitled, owed = figure.data
    assert delivered.type == "bar" and entitled.type == "scatter" and owed.type == "scatter"
    assert list(delivered.y) == [150.0, 180.0, 0.0]
    assert list(entitled.y) == [240.0, 240.0, 240.0]
    assert list(owed.y) == [200.0, 120.0, 0.0]
    assert list(delivered.x) == [T0, T0 + timedelta(days=1), T0 + timedelta(days=2)]
    assert entitled.line.dash == "dash"
    assert figure.layout.yaxis.title.text == "GPU-h per day"
    assert delivery_timeseries(points, bucket="hour").layout.yaxis.title.text == "GPU-h per hour"


def test_delivery_timeseries_rounds_gpu_hours_to_hundredths():
    point = UsagePoint(start=T0, delivered_gpu_seconds=Decimal("4000.000001"))
    assert list(delivery_timeseries([point], bucket="hour").data[0].y) == [1.11]


def rank_row(name, history) -> FairShareRow:
    return FairShareRow(
        kind="project",
        id=len(name),
        name=name,
        depth=2,
        parent=("program", 1),
        share=Decimal(50),
        budgeted=True,
        whole=True,
        history=history,
    )


def test_fairshare_lines_one_line_per_sibling_and_a_reference_at_one():
    instants = [T0, T0 + timedelta(days=1), T0 + timedelta(days=1, hours=9)]
    figure = fairshare_lines(
        instants, [rank_row("Detection", [0.0, 1.23456, 1.5]), rank_row("New", [None, 0.5, 0.5])]
    )
    first, second = figure.data
    assert (first.name, second.name) == ("Detection", "New")
    assert list(first.x) == instants
    assert list(first.y) == [0.0, 1.235, 1.5]
    assert list(second.y) == [None, 0.5, 0.5]  # not budgeted yet: a gap, not a zero
    [reference] = figure.layout.shapes
    assert (reference.y0, reference.y1) == (1, 1)
    assert figure.layout.annotations[0].text == "at its share"


def test_fairshare_lines_without_siblings_is_an_empty_figure():
    assert fairshare_lines([T0], []).data == ()


def test_health_pyramid_percent_lines_with_gaps_for_unknown_days():
    known = HealthDay(
        day=T0,
        known_hours=24,
        capacity_gpu_seconds=H * 24 * 32,
        healthy_gpu_seconds=H * 24 * 28,
        allocated_known_gpu_seconds=H * 24 * 21,
        owed_gpu_seconds=H * 400,
        owed_delivered_gpu_seconds=H * 392,
        hourly_owed_delivered_gpu_seconds=H * 300,
    )
    unknown = HealthDay(day=T0 + timedelta(days=1))
    figure = health_pyramid([known, unknown])
    series = {trace.name: list(trace.y) for trace in figure.data}
    assert series == {
        "Availability (healthy ÷ all GPUs)": [87.5, None],
        "Occupancy (allocated ÷ healthy)": [75.0, None],
        "Impact (delivery ratio)": [98.0, None],
        "Hourly delivery ratio": [75.0, None],
    }
    assert figure.data[0].connectgaps is False
    assert figure.layout.yaxis.ticksuffix == " %"


def test_nodes_by_state_leaves_out_empty_states():
    counts = [
        NodeStateCount("healthy", "Healthy", 30, 240),
        NodeStateCount("draining", "Draining", 1, 8),
        NodeStateCount("drained", "Drained", 0, 0),
        NodeStateCount("down", "Down", 1, 8),
    ]
    figure = nodes_by_state_bar(counts)
    assert [trace.name for trace in figure.data] == [
        "Healthy: 30 nodes",
        "Draining: 1 node",
        "Down: 1 node",
    ]
    assert [trace.x[0] for trace in figure.data] == [240, 8, 8]
    assert figure.layout.barmode == "stack"
    assert figure.layout.showlegend is False  # the table of states below is the legend
    assert figure.data[1].marker.color == "#d08a2e"


def test_figures_serialize_to_plain_json_for_the_page():
    data = figure_json(builders.delivery_bars([usage_row("Detection", 10, 5)]))
    assert data["data"][0]["x"] == [10.0]
    assert data["layout"]["height"] == 220


def test_a_bucket_not_over_yet_is_a_lighter_bar_and_off_the_lines():
    points = [
        UsagePoint(start=T0, entitled_gpu_seconds=H * 24, owed_gpu_seconds=H * 20),
        UsagePoint(
            start=T0 + timedelta(days=1),
            entitled_gpu_seconds=H * 3,
            owed_gpu_seconds=H * 2,
            delivered_gpu_seconds=H * 2,
        ),
    ]
    now = T0 + timedelta(days=1, hours=3)
    delivered, entitled, owed = delivery_timeseries(points, bucket="day", now=now).data
    assert list(delivered.y) == [0.0, 2.0]
    assert list(delivered.marker.color) == ["#0f766e", "#9fd0ca"]
    assert list(delivered.customdata) == ["", "so far"]
    assert list(entitled.y) == [24.0, None]
    assert list(owed.y) == [20.0, None]


@pytest.mark.parametrize("largest", [0.004, 0.03, 0.4, 1.0, 2.9, 4.9, 7.5, 12.0, 99.0, 5400.0])
def test_amount_axes_never_show_a_column_of_identical_labels(largest):
    # Plotly puts ticks at 1, 2 or 5 x 10^n apart, about 5 to 10 over the axis: every such
    # spacing of at least a tenth of the largest value must give labels that differ.
    fmt = amount_tickformat([0, largest])
    decimals = int(fmt.removeprefix(",.").removesuffix("f"))
    exponent = math.floor(math.log10(largest / 10))
    for mantissa in (1, 2, 5, 10):
        step = mantissa * 10.0**exponent
        if step < largest / 10:
            continue
        ticks = [k * step for k in range(int(largest / step) + 1)]
        labels = [f"{t:,.{decimals}f}" for t in ticks]
        assert len(set(labels)) == len(labels), (largest, step, labels)


def test_small_amounts_get_decimals_on_the_axis():
    # An hour of a small project: 0.4 GPU-h delivered, 1.2 owed.
    points = [
        SimpleNamespace(
            start=datetime(2026, 10, 5, 9, tzinfo=UTC), delivered_gpu_seconds=Decimal(1440),
            entitled_gpu_seconds=Decimal(4320), owed_gpu_seconds=Decimal(4320),
        )
    ]  # fmt: skip
    figure = delivery_timeseries(points, bucket="hour")
    assert figure.layout.yaxis.tickformat == ",.1f"
