"""Pictures of a replay: the GPU timeline and owed-vs-delivered per team.

Figure builders are pure functions (replay data in, ``plotly.graph_objects.Figure`` out), so
tests assert on figure data. ``write_timeline_html`` is the only I/O: it writes one page with
plotly.js saved next to it (never a CDN), so the page works offline.

A whole replay is too much to draw (the Philly trace has ~100,000 runs over months), so the
timeline shows a bounded window — by default the ``span`` (7 days) with the highest demand
inside the submit window — and the page says which.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs

from scheduler.simulator.ledger import HOUR
from scheduler.simulator.replay import ReplayResult

PLOTLY_JS = "plotly.min.js"
_PALETTE = qualitative.Dark24 + qualitative.Light24


@dataclass(frozen=True)
class Window:
    """The stretch of virtual time a timeline shows (seconds), and why it was chosen."""

    start: float
    end: float
    why: str


def team_colors(projects: list[str]) -> dict[str, str]:
    """A stable colour per project (sorted order → palette order)."""
    return {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(sorted(projects))}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


def choose_window(result: ReplayResult, span: float, start: float | None = None) -> Window:
    """The timeline's window: ``[start, start + span)`` if given, else the ``span`` (whole
    hours) with the most demand (pending + running GPU-hours) among those starting inside the
    submit window; on a tie the later one (where the backlog has built up)."""
    if start is not None:
        return Window(start, start + span, "chosen")
    ledger = result.ledger
    hours = max(1, math.ceil(span / HOUR))
    totals = [
        sum(ledger.demand[i][h] for i in range(len(ledger.projects))) for h in range(ledger.hours)
    ]
    last_start = min(len(totals) - 1, int((result.last_submit - ledger.hour0) // HOUR))
    totals += [0.0] * hours  # windows may run past the end of the replay
    best = running = sum(totals[:hours])
    best_h = 0
    for h in range(1, last_start + 1):
        running += totals[h + hours - 1] - totals[h - 1]
        if running >= best:
            best, best_h = running, h
    begin = ledger.hour_start(best_h)
    return Window(begin, begin + hours * HOUR, "the span with the most demand")


# Vertical space of the timeline outside its plot area, in pixels.
_TIMELINE_MARGIN = {"l": 70, "r": 20, "t": 60, "b": 50}
# About this many time cells per GPU row, whatever the window: 12 minutes a cell over 2 days.
TIMELINE_COLUMNS = 240
# How much a preemptible run's colour is mixed with white (0: the team's colour).
PREEMPTIBLE_TINT = 0.55


def _tint(hex_colour: str, amount: float) -> str:
    """Mix ``hex_colour`` (``#rrggbb``) with white by ``amount`` (0 = unchanged, 1 = white)."""
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in (red, green, blue))


def timeline_cell_seconds(window: Window) -> float:
    """The time one cell of the timeline covers: the window over ``TIMELINE_COLUMNS``, in
    whole minutes."""
    return 60.0 * max(1, math.ceil((window.end - window.start) / TIMELINE_COLUMNS / 60))


@dataclass
class _Tally:
    """Seconds each (GPU row, time cell) spent under each (team, preemptible) code, and
    the preemption marks, of the runs inside a window."""

    held: dict[tuple[int, int], dict[int, float]] = field(default_factory=dict)
    codes: dict[tuple[str, bool], int] = field(default_factory=dict)
    marks_x: list[float] = field(default_factory=list)
    marks_y: list[int] = field(default_factory=list)
    marks_text: list[str] = field(default_factory=list)


class _Grid(NamedTuple):
    """The heatmap's cells (colour codes) and the colour scale naming them."""

    z: list[list[int | None]]
    order: list[tuple[str, bool]]  # (team, preemptible) of each code
    labels: list[str]
    scale: list[list]


def _tally_runs(result: ReplayResult, window: Window, cell: float, columns: int) -> _Tally:
    """Spread every run inside ``window`` over the cells of its GPU rows."""
    ws, we = window.start, window.end
    tally = _Tally()
    for run in result.runs:
        if run.end <= ws or run.start >= we or run.end <= run.start:
            continue
        job = result.jobs[run.job]
        pieces = (
            (max(run.start, ws), min(run.protected_until, run.end, we), False),
            (max(run.protected_until, run.start, ws), min(run.end, we), True),
        )
        for lo, hi, preemptible in pieces:
            if hi <= lo:
                continue
            code = tally.codes.setdefault((job.project, preemptible), len(tally.codes))
            first, last = int((lo - ws) // cell), min(columns - 1, int((hi - ws) // cell))
            for column in range(first, last + 1):
                left = ws + column * cell
                seconds = min(hi, left + cell) - max(lo, left)
                if seconds <= 0:
                    continue
                for row in run.rows:
                    spent = tally.held.setdefault((row, column), {})
                    spent[code] = spent.get(code, 0.0) + seconds
        if run.preempted and ws <= run.end < we:
            for row in run.rows:
                tally.marks_x.append(round(run.end * 1000))
                tally.marks_y.append(row)
                tally.marks_text.append(job.id)
    return tally


def _grid(tally: _Tally, rows: int, columns: int, colors: dict[str, str]) -> _Grid:
    """Each cell takes the code that held it longest; codes are renumbered in (team,
    state) order, so a team's two colours sit side by side in the scale."""
    order = sorted(tally.codes)
    renumber = {tally.codes[key]: index for index, key in enumerate(order)}
    z: list[list[int | None]] = [[None] * columns for _ in range(rows)]
    for (row, column), spent in tally.held.items():
        z[row][column] = renumber[max(spent, key=lambda code: (spent[code], -code))]
    labels, scale = [], []
    count = max(1, len(order))
    for index, (project, preemptible) in enumerate(order):
        colour = colors.get(project, "#888888")
        colour = _tint(colour, PREEMPTIBLE_TINT) if preemptible else colour
        labels.append(f"{project}, {'preemptible' if preemptible else 'protected'}")
        scale += [[index / count, colour], [(index + 1) / count, colour]]
    return _Grid(z, order, labels, scale)


def _add_legend_and_marks(
    fig: go.Figure, grid: _Grid, tally: _Tally, colors: dict[str, str]
) -> None:
    """The heatmap has no legend of its own: one empty trace per team names its colour;
    then the preemption marks, if any."""
    for project in sorted({project for project, _ in grid.order}):
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=project,
                marker={"symbol": "square", "size": 10, "color": colors.get(project, "#888")},
                hoverinfo="skip",
            )
        )
    if tally.marks_x:
        fig.add_trace(
            go.Scatter(
                x=tally.marks_x,
                y=tally.marks_y,
                text=tally.marks_text,
                mode="markers",
                name="preempted",
                marker={"symbol": "x", "color": "black", "size": 6},
                hovertemplate="preempted %{text}<extra></extra>",
            )
        )


def _lay_out_timeline(fig: go.Figure, result: ReplayResult, window: Window, cell: float) -> None:
    """Title, size and axes: dates across, one row per GPU down, ticks at nodes."""
    gpn = result.config.gpus_per_node
    rows = result.config.gpus
    ws, we = window.start, window.end
    node_ticks = list(range(0, rows, gpn * max(1, rows // gpn // 32)))
    fig.update_layout(
        title={
            "text": f"{result.policy}: one row per GPU, {_iso(ws)} - {_iso(we)} UTC",
            "x": 0.01,
        },
        height=max(400, min(2400, 3 * rows + 200)),
        xaxis={
            "type": "date",
            "range": [ws * 1000, we * 1000],
            "title": f"time (UTC), one cell = {round(cell / 60)} min",
        },
        yaxis={
            "title": "GPU (node x GPUs per node + slot)",
            "range": [rows - 0.5, -0.5],
            "tickvals": node_ticks,
            "ticktext": [f"n{t // gpn:03d}" for t in node_ticks],
            "showgrid": False,
        },
        legend={"title": "team"},
        margin=_TIMELINE_MARGIN,
    )


def timeline_figure(
    result: ReplayResult, window: Window, colors: dict[str, str] | None = None
) -> go.Figure:
    """One row per GPU and one column per time cell inside ``window``, coloured by team.

    A cell takes the team whose run held that GPU longest within it, in the team's colour
    while the run was protected by its minimum runtime and pale once preemptible (free-lane
    runs are pale throughout); an ``x`` marks where a run was preempted. Times are drawn as
    dates (milliseconds since the epoch on a date axis).

    The picture is a heatmap, drawn by the browser as one image: a busy window holds over
    10,000 runs, and drawn as bars or line segments (an element or path piece each) they
    took over half a second to draw. The trace's ``meta.labels`` name each colour code; the
    page turns them into hover text (``static/js/figure.js``, ``hover_labels`` for the
    file the CLI writes), so the figure does not carry a label per cell.
    """
    colors = colors or team_colors(result.projects)
    cell = timeline_cell_seconds(window)
    columns = max(1, math.ceil((window.end - window.start) / cell))
    tally = _tally_runs(result, window, cell, columns)
    grid = _grid(tally, result.config.gpus, columns, colors)
    count = max(1, len(grid.order))
    fig = go.Figure()
    fig.add_trace(
        go.Heatmap(
            z=grid.z,
            x0=round((window.start + cell / 2) * 1000),
            dx=round(cell * 1000),
            y0=0,
            dy=1,
            zmin=-0.5,
            zmax=count - 0.5,
            colorscale=grid.scale or [[0, "#ffffff"], [1, "#ffffff"]],
            showscale=False,
            hoverongaps=False,
            meta={"labels": grid.labels},
            hovertemplate="%{text}<br>GPU row %{y}<br>%{x}<extra></extra>",
            name="runs",
            showlegend=False,
        )
    )
    _add_legend_and_marks(fig, grid, tally, colors)
    _lay_out_timeline(fig, result, window, cell)
    return fig


def hover_labels(fig: go.Figure) -> go.Figure:
    """``fig`` with each heatmap cell's hover text set from its trace's ``meta.labels`` (the
    file the CLI writes draws with Plotly alone; the web pages do this in the browser)."""
    for trace in fig.data:
        labels = (trace.meta or {}).get("labels") if trace.type == "heatmap" else None
        if labels:
            trace.text = [["" if c is None else labels[c] for c in row] for row in trace.z]
    return fig


def delivery_figure(metrics: dict, period: str = "whole") -> go.Figure:
    """Owed vs delivered GPU-hours per budgeted team, from one policy's metrics.

    ``period`` is ``"whole"`` (the whole replay) or ``"submit_window"``. Delivered is
    min(charged, owed); burst (charged above entitlement) is shown beside them.
    """
    source = metrics if period == "whole" else metrics["submit_window"]
    teams = [t for t in source["teams"] if t["budgeted"]]
    teams.sort(key=lambda t: -t["owed_gpu_hours"])
    names = [t["project"] for t in teams]
    owed = [t["owed_gpu_hours"] for t in teams]
    delivered = [min(t["charged_gpu_hours"], t["owed_gpu_hours"]) for t in teams]
    ratios = [
        "—" if t["delivery_ratio"] is None else f"{100 * t['delivery_ratio']:.0f} %" for t in teams
    ]
    fig = go.Figure(
        [
            go.Bar(x=names, y=owed, name="owed", marker={"color": "#9aa5b1"}),
            go.Bar(
                x=names,
                y=delivered,
                name="delivered",
                marker={"color": "#2b6cb0"},
                text=ratios,
                textposition="outside",
            ),
            go.Bar(
                x=names,
                y=[t["burst_gpu_hours"] for t in teams],
                name="burst",
                marker={"color": "#ed8936"},
            ),
        ]
    )
    label = "whole replay" if period == "whole" else "submit window"
    fig.update_layout(
        title=f"{metrics['policy']}: owed vs delivered GPU-hours per team ({label}, "
        f"{metrics['gpus']} GPUs)",
        barmode="group",
        yaxis={"title": "GPU-hours"},
        xaxis={"title": "team"},
        height=420,
    )
    return fig


def write_timeline_html(path: Path, sections: list[tuple[str, str, list[go.Figure]]]) -> Path:
    """Write a page of ``(heading, note, figures)`` sections to ``path``; plotly.js is written
    once beside it as ``plotly.min.js`` and loaded from there."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    js = path.parent / PLOTLY_JS
    if not js.exists():
        js.write_text(get_plotlyjs(), encoding="utf-8")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>Simulation timeline</title>",
        f"<script src='{PLOTLY_JS}'></script>",
        "<style>body{font-family:sans-serif;margin:1.5em}p.note{color:#444}</style>",
        "</head><body><h1>Simulation timeline</h1>",
    ]
    for heading, note, figures in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2><p class='note'>{html.escape(note)}</p>")
        for fig in figures:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=False))
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
