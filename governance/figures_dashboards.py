"""Plotly figure builders of the manager/PI dashboards: pure functions from selector rows.

Each takes rows a selector returned (``governance.selectors.usage``, ``.fairshare``,
``.health``) — or anything with the same attributes — and returns a Plotly figure as plain
data (``{"data": [...], "layout": {...}}``: see ``governance.figures``). They read nothing
from the database; the page serializes the figure with
``governance.figures.figure_json`` and ``static/js/figure.js`` draws it with the self-hosted
Plotly bundle. Tests assert on the figures' data. Amounts are plotted in GPU-hours and
ratios in percent, rounded for the eye (two decimals); the tables carry the exact figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from governance.figures import FONT, PROGRAM_COLOURS

OWED_COLOUR = "#9aa9bb"
DELIVERED_COLOUR = "#0f766e"
ENTITLED_COLOUR = "#3b6fb6"
PARTIAL_COLOUR = "#9fd0ca"  # the delivered colour, lighter: a bucket not over yet
GRID_COLOUR = "#e6e9ee"
STATE_COLOURS = {
    "healthy": "#2f8f5b",
    "draining": "#d08a2e",
    "drained": "#8a94a3",
    "down": "#b42318",
}
# Row height of a horizontal bar chart, in pixels per team (two bars: owed and delivered).
BAR_ROW_PX = 34


def _hours(seconds) -> float:
    """GPU-seconds → GPU-hours rounded to 0.01 for plotting."""
    return round(float(Decimal(seconds) / Decimal(3600)), 2)


def _percent(ratio) -> float | None:
    """A ratio → percent with two decimals, ``None`` (a gap in a line) when unknown."""
    return None if ratio is None else round(float(ratio) * 100, 2)


def _layout(
    traces: list[dict], *, xaxis: dict | None = None, yaxis: dict | None = None, **extra
) -> dict:
    """The figure of ``traces`` with the dashboards' shared look: transparent background,
    light grid, legend on top; ``extra`` and the axes' own settings merged in."""
    layout = {
        "margin": {"t": 36, "l": 8, "r": 16, "b": 8},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "font": FONT,
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        "hovermode": "x unified",
        **extra,
        "xaxis": {"gridcolor": GRID_COLOUR, "automargin": True, **(xaxis or {})},
        "yaxis": {
            "gridcolor": GRID_COLOUR, "automargin": True, "rangemode": "tozero", **(yaxis or {})
        },
    }  # fmt: skip
    # A key set to None is left out, as Plotly leaves out a property set to None.
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {k: v for k, v in layout[axis].items() if v is not None}
    return {"data": traces, "layout": layout}


def delivery_bars(rows: Sequence) -> dict:
    """Owed vs delivered GPU-hours per team: two horizontal bars per row, first row on top.

    ``rows`` are ``UsageRow``s (``name``, ``owed_gpu_seconds``, ``charged_gpu_seconds``,
    ``delivery_ratio``). The delivery ratio (min(delivered, owed) ÷ owed) is in the hover and
    in the y label. ``layout.height`` grows with the number of teams.
    """
    names = [
        f"{row.name} · {_percent(row.delivery_ratio):.1f} %"
        if row.delivery_ratio is not None
        else f"{row.name} · nothing owed"
        for row in rows
    ]
    ratio = [_percent(row.delivery_ratio) for row in rows]
    owed = [_hours(row.owed_gpu_seconds) for row in rows]
    delivered = [_hours(row.charged_gpu_seconds) for row in rows]
    traces = [
        {
            "type": "bar",
            "name": "Owed",
            "y": names,
            "x": owed,
            "orientation": "h",
            "marker": {"color": OWED_COLOUR},
            "customdata": ratio,
            "hovertemplate": "Owed %{x:,.1f} GPU-h<extra></extra>",
        },
        {
            "type": "bar",
            "name": "Delivered (charged)",
            "y": names,
            "x": delivered,
            "orientation": "h",
            "marker": {"color": DELIVERED_COLOUR},
            "customdata": ratio,
            "hovertemplate": "Delivered %{x:,.1f} GPU-h · delivery %{customdata:.2f} %"
            "<extra></extra>",
        },
    ]
    amounts = [v for values in (owed, delivered) for v in values if v is not None]
    return _layout(
        traces,
        barmode="group",
        bargap=0.25,
        height=max(220, 90 + BAR_ROW_PX * len(rows)),
        hovermode="y unified",
        yaxis={"autorange": "reversed", "rangemode": None},
        xaxis={"title": {"text": "GPU-hours"}, "tickformat": amount_tickformat(amounts)},
    )


def amount_tickformat(values) -> str:
    """The tick format of an amount axis: enough decimals that ticks as close as a tenth of
    the largest value read differently (",.0f" put "0 0 0 1 1" under values below 5)."""
    largest = max((abs(float(v)) for v in values if v is not None), default=0.0)
    if largest <= 0:
        return ",.0f"
    step = largest / 10
    decimals = 0 if step >= 1 else min(6, math.ceil(-math.log10(step)))
    return f",.{decimals}f"


def delivery_timeseries(points: Sequence, *, bucket: str, now: datetime | None = None) -> dict:
    """Delivered (bars) against entitled and owed (lines) per hour or day, in GPU-hours.

    ``points`` are ``UsagePoint``s (``start``, ``delivered_gpu_seconds``,
    ``entitled_gpu_seconds``, ``owed_gpu_seconds``). Entitled is the share x healthy GPUs;
    owed is entitlement capped at demand hour by hour, so delivered at or above the owed
    line is a team that got what it was owed. Buckets not over at ``now`` (today so far)
    are drawn as a lighter bar and left off the lines, which would otherwise dive at the
    end for no reason a reader could see.
    """
    step = timedelta(days=1) if bucket == "day" else timedelta(hours=1)
    partial = [now is not None and p.start + step > now for p in points]
    x = [p.start for p in points]
    unit = "GPU-h per day" if bucket == "day" else "GPU-h per hour"

    def line(values):
        return [None if cut else v for v, cut in zip(values, partial, strict=True)]

    delivered = [_hours(p.delivered_gpu_seconds) for p in points]
    entitled = line([_hours(p.entitled_gpu_seconds) for p in points])
    owed = line([_hours(p.owed_gpu_seconds) for p in points])
    traces = [
        {
            "type": "bar",
            "name": "Delivered (charged)",
            "x": x,
            "y": delivered,
            "marker": {"color": [PARTIAL_COLOUR if cut else DELIVERED_COLOUR for cut in partial]},
            "customdata": ["so far" if cut else "" for cut in partial],
            "hovertemplate": "%{y:,.1f} GPU-h %{customdata}",
        },
        {
            "type": "scatter",
            "name": "Entitled (share x healthy GPUs)",
            "x": x,
            "y": entitled,
            "mode": "lines",
            "line": {"color": ENTITLED_COLOUR, "dash": "dash", "width": 2},
            "hovertemplate": "%{y:,.1f} GPU-h",
        },
        {
            "type": "scatter",
            "name": "Owed (entitled, capped at demand)",
            "x": x,
            "y": owed,
            "mode": "lines",
            "line": {"color": "#1f2933", "width": 2},
            "hovertemplate": "%{y:,.1f} GPU-h",
        },
    ]
    amounts = [v for values in (delivered, entitled, owed) for v in values if v is not None]
    return _layout(
        traces,
        bargap=0.15,
        yaxis={"title": {"text": unit}, "tickformat": amount_tickformat(amounts)},
    )


def fairshare_lines(instants: Sequence[datetime], rows: Sequence) -> dict:
    """Each sibling's usage share ÷ share at the end of each day, one line per sibling.

    ``rows`` are ``FairShareRow``s of one parent's children (``name``, ``history``: the
    metric at each of ``instants``, ``None`` where the node was unbudgeted or nothing was
    used under its parent: a gap). A dotted line
    at 1 marks "used exactly its share"; the lowest line goes first.
    """
    traces = [
        {
            "type": "scatter",
            "name": row.name,
            "x": list(instants),
            "y": [None if v is None else round(v, 3) for v in row.history],
            "mode": "lines+markers",
            "line": {"color": PROGRAM_COLOURS[index % len(PROGRAM_COLOURS)], "width": 2},
            "marker": {"size": 5},
            "hovertemplate": f"{row.name}: %{{y:.2f}}<extra></extra>",
        }
        for index, row in enumerate(rows)
    ]
    reference = {"color": "#5f6b7a", "dash": "dot", "width": 1}
    return _layout(
        traces,
        showlegend=True,  # also with one line: say whose line it is
        # "at its share": a dotted line at 1 across the plot, labelled at its left end.
        shapes=[
            {"type": "line", "line": reference, "xref": "x domain", "x0": 0, "x1": 1,
             "yref": "y", "y0": 1, "y1": 1}
        ],
        annotations=[
            {"text": "at its share", "font": {"color": "#5f6b7a", "size": 11},
             "showarrow": False, "xref": "x domain", "x": 0, "xanchor": "left",
             "yref": "y", "y": 1, "yanchor": "bottom"}
        ],
        yaxis={"title": {"text": "usage share ÷ share (lower goes first)"}, "tickformat": ".2f"},
    )  # fmt: skip


def health_pyramid(days: Sequence) -> dict:
    """Availability, occupancy and impact per day, in percent (the metrics pyramid).

    ``days`` are ``HealthDay``s (``day``, ``availability``, ``occupancy``, ``impact``,
    ``hourly_impact``; ``None`` = unknown, drawn as a gap). The hourly delivery ratio is a
    dotted line beside the delivery ratio.
    """
    return _percent_lines(
        days,
        [
            ("Availability (healthy ÷ all GPUs)", "availability", "#3b6fb6", "solid"),
            ("Occupancy (allocated ÷ healthy)", "occupancy", "#0f766e", "solid"),
            ("Impact (delivery ratio)", "impact", "#a1662f", "solid"),
            ("Hourly delivery ratio", "hourly_impact", "#a1662f", "dot"),
        ],
    )


def _percent_lines(days: Sequence, series: Sequence[tuple[str, str, str, str]]) -> dict:
    """One line per ``(label, attribute, colour, dash)`` of ``series`` over ``days`` (their
    ``day``), the attribute a 0..1 ratio drawn in percent; ``None`` is a gap, never 0 %."""
    x = [d.day for d in days]
    traces = [
        {
            "type": "scatter",
            "name": label,
            "x": x,
            "y": [_percent(getattr(d, attribute)) for d in days],
            "mode": "lines+markers",
            "line": {"color": colour, "dash": dash, "width": 2},
            "marker": {"size": 5},
            "hovertemplate": "%{y:.2f} %",
            "connectgaps": False,
        }
        for label, attribute, colour, dash in series
    ]
    return _layout(
        traces, yaxis={"title": {"text": "percent"}, "ticksuffix": " %", "range": [0, 105]}
    )


def nodes_by_state_bar(counts: Sequence) -> dict:
    """GPUs of the cluster by node state now, one horizontal stacked bar.

    ``counts`` are ``NodeStateCount``s (``state``, ``label``, ``nodes``, ``gpus``); states
    with no node are left out.
    """
    shown = [c for c in counts if c.nodes]
    traces = [
        {
            "type": "bar",
            "name": f"{c.label}: {c.nodes:,} node{'' if c.nodes == 1 else 's'}",
            "y": ["GPUs"],
            "x": [c.gpus],
            "orientation": "h",
            "marker": {"color": STATE_COLOURS.get(c.state, "#8a94a3")},
            "hovertemplate": f"{c.label}: %{{x:,}} GPUs<extra></extra>",
        }
        for c in shown
    ]
    # No legend: the table of states under the bar uses the same colours (a legend would
    # crowd the strip on a phone).
    return _layout(
        traces,
        barmode="stack",
        height=110,
        hovermode="closest",
        showlegend=False,
        margin={"t": 8, "l": 8, "r": 16, "b": 8},
        xaxis={"title": None, "tickformat": ",d"},
        yaxis={"showticklabels": False, "rangemode": None},
    )


def health_utilization(days: Sequence) -> dict:
    """Utilization (busy ÷ allocated of the measured GPU time) and telemetry coverage per
    day, in percent: the pyramid's fourth level.

    ``days`` are ``UtilizationDay``s (``day``, ``utilization``, ``coverage``; ``None`` =
    nothing measured, or nothing in the ledger: a gap, never 0 %). Coverage is dotted: the
    share of the ledger's allocated GPU-hours the utilization was measured on.
    """
    return _percent_lines(
        days,
        [
            ("Utilization (busy ÷ allocated, measured)", "utilization", "#6b5fb5", "solid"),
            ("Telemetry coverage (measured ÷ allocated)", "coverage", "#8a94a3", "dot"),
        ],
    )


RUN_COLOURS = ["#6b5fb5", "#0f766e", "#a1662f", "#3b6fb6", "#b0546b"]


def run_utilization_lines(traces: Sequence) -> dict:
    """Busy percent per UTC hour of each run of a workload (the workload page's trace).

    ``traces`` are ``RunTrace``s (``run.attempt``, ``hours``: rows of
    ``run_utilization_trace`` with ``hour`` and ``utilization``); runs without telemetry
    are left out, hours without it are gaps (never 0 %).
    """
    shown = [t for t in traces if t.hours]

    def points(hours: Sequence[dict]) -> tuple[list, list]:
        # A point of None after each hour the next measured hour does not follow: the line
        # breaks over unmeasured hours instead of bridging them.
        x, y = [], []
        for index, row in enumerate(hours):
            x.append(row["hour"])
            y.append(_percent(row["utilization"]))
            after = row["hour"] + timedelta(hours=1)
            if index + 1 < len(hours) and hours[index + 1]["hour"] > after:
                x.append(after)
                y.append(None)
        return x, y

    drawn = [(trace, *points(trace.hours)) for trace in shown]
    traces_out = [
        {
            "type": "scatter",
            "name": f"Run {trace.run.attempt}",
            "x": x,
            "y": y,
            "mode": "lines+markers",
            "line": {"color": RUN_COLOURS[index % len(RUN_COLOURS)], "width": 2},
            "marker": {"size": 6},
            "hovertemplate": f"Run {trace.run.attempt}: %{{y:.2f}} % busy<extra></extra>",
            "connectgaps": False,
        }
        for index, (trace, x, y) in enumerate(drawn)
    ]
    return _layout(
        traces_out,
        showlegend=len(shown) > 1,
        hovermode="closest",
        margin={"t": 24, "l": 8, "r": 16, "b": 8},
        yaxis={"title": {"text": "busy %"}, "ticksuffix": " %", "range": [0, 105]},
    )
