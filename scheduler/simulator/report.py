"""Run a comparison and present it: ``metrics.json``, the side-by-side table, the timeline page.

``run_comparison`` is what the ``simulate`` command (and later the browser page) calls: one
replay per policy on the same trace, budgets and cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from scheduler.simulator.budgets import Budget
from scheduler.simulator.durations import format_duration
from scheduler.simulator.metrics import compute_metrics
from scheduler.simulator.replay import ReplayConfig, ReplayResult, replay
from scheduler.simulator.timeline import (
    choose_window,
    delivery_figure,
    hover_labels,
    team_colors,
    timeline_figure,
    write_timeline_html,
)
from scheduler.simulator.traces import Trace


def run_comparison(
    trace: Trace,
    budgets: Budget | None,
    config: ReplayConfig,
    policies: list[str],
    *,
    on_done: Callable[[ReplayResult, dict], None] | None = None,
) -> list[tuple[ReplayResult, dict]]:
    """Replay ``trace`` once per policy (same cluster, budgets and contract); return each
    replay with its metrics. ``on_done`` is called after each policy (progress output)."""
    out = []
    for policy in policies:
        result = replay(trace, budgets, replace(config, policy=policy))
        metrics = compute_metrics(result)
        if on_done:
            on_done(result, metrics)
        out.append((result, metrics))
    return out


def write_metrics(path: Path, metrics: list[dict]) -> Path:
    """Write ``metrics.json``: a list with one object per policy."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return path


def write_timeline(
    path: Path,
    runs: list[tuple[ReplayResult, dict]],
    *,
    span: float = 7 * 86400.0,
    start: float | None = None,
) -> Path:
    """Write the timeline page: per policy, the GPU timeline over one window (the same window
    for every policy, chosen on the first) and owed vs delivered per team."""
    first = runs[0][0]
    window = choose_window(first, span, start)
    colors = team_colors(first.projects)
    shown = sum(1 for r in first.runs if r.start < window.end and r.end > window.start)
    sections = []
    for result, metrics in runs:
        note = (
            f"{metrics['gpus']} GPUs, {metrics['jobs']:,} jobs. The timeline shows only "
            f"{_day(window.start)} - {_day(window.end)} UTC ({window.why}; "
            f"{format_duration(window.end - window.start)} of "
            f"{format_duration(metrics['simulated_seconds'])} replayed, about {shown:,} runs) "
            "to keep the page light. GPUs are coloured by the team that held them: full colour while "
            "the run is protected by its minimum runtime, pale once preemptible; x marks a "
            "preemption. The bar "
            "charts cover the whole replay and the submit window."
        )
        sections.append(
            (
                f"{result.policy}",
                note,
                [
                    hover_labels(timeline_figure(result, window, colors)),
                    delivery_figure(metrics, "whole"),
                    delivery_figure(metrics, "submit_window"),
                ],
            )
        )
    return write_timeline_html(path, sections)


def _day(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


def _pct(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _secs(value) -> str:
    return "—" if value is None else format_duration(value)


def _num(value) -> str:
    return "—" if value is None else f"{value:,.0f}"


# (label, how to read it from one period's figures, how to format it)
_ROWS: list[tuple[str, Callable[[dict], object], Callable[[object], str]]] = [
    ("delivery ratio (org)", lambda m: m["delivery_ratio"], _pct),
    ("worst team delivery", lambda m: m["worst_team_delivery_ratio"], _pct),
    ("  worst team", lambda m: m["worst_team"] or "—", str),
    ("teams ≥ 95 % delivered", lambda m: f"{m['teams_at_least_95pct']}/{m['teams_judged']}", str),
    ("hourly delivery (org)", lambda m: m["hourly_delivery_ratio"], _pct),
    ("worst team hourly", lambda m: m["worst_team_hourly_delivery_ratio"], _pct),
    ("occupancy", lambda m: m["occupancy"], _pct),
    ("occupancy when oversubscribed", lambda m: m["occupancy_when_oversubscribed"], _pct),
    ("unbudgeted fraction", lambda m: m["unbudgeted_fraction"], _pct),
    ("debug wait p50", lambda m: m["queue_wait_seconds"]["debug"]["p50"], _secs),
    ("debug wait p90", lambda m: m["queue_wait_seconds"]["debug"]["p90"], _secs),
    ("other wait p50", lambda m: m["queue_wait_seconds"]["other"]["p50"], _secs),
    ("other wait p90", lambda m: m["queue_wait_seconds"]["other"]["p90"], _secs),
    ("gang wait p50", lambda m: m["queue_wait_seconds"]["gang"]["p50"], _secs),
    ("gang wait p90", lambda m: m["queue_wait_seconds"]["gang"]["p90"], _secs),
    ("whole-node wait p50", lambda m: m["queue_wait_seconds"]["whole_node"]["p50"], _secs),
    ("whole-node wait p90", lambda m: m["queue_wait_seconds"]["whole_node"]["p90"], _secs),
    ("all wait mean", lambda m: m["queue_wait_seconds"]["all"]["mean"], _secs),
    ("wait after preemption p50", lambda m: m["queue_wait_seconds"]["requeue"]["p50"], _secs),
    ("wait after preemption p90", lambda m: m["queue_wait_seconds"]["requeue"]["p90"], _secs),
    (
        "every wait p90 (first + after preemption)",
        lambda m: m["queue_wait_seconds"]["every"]["p90"],
        _secs,
    ),
    ("preemptions", lambda m: m["preemptions"], _num),
    ("lost GPU-hours", lambda m: m["lost_gpu_hours"], _num),
    ("lost ÷ charged GPU-hours", lambda m: m["lost_fraction_of_charged"], _pct),
]


# Shown only when some job of the trace had a utilization (Philly has none: its table stays).
_IDLE_ROW: tuple[str, Callable[[dict], object], Callable[[object], str]] = (
    "idle GPU-hours",
    lambda m: m.get("idle_gpu_hours"),
    _num,
)


def comparison_rows(metrics: list[dict]) -> list[tuple[str, list[str]]]:
    """The table as (label, one cell per policy) rows: the submit window (while jobs still
    arrive: what users feel) first, then the whole replay. "idle GPU-hours" is a row only
    when some job had a utilization (``jobs_with_utilization``)."""
    figures = list(_ROWS)
    if any(m.get("jobs_with_utilization") for m in metrics):
        figures.append(_IDLE_ROW)
    rows: list[tuple[str, list[str]]] = []
    rows.append(("policy", [m["policy"] for m in metrics]))
    rows.append(("wall seconds", [f"{m['wall_seconds']:.1f}" for m in metrics]))
    rows.append(("replay ends after", [_secs(m["simulated_seconds"]) for m in metrics]))
    rows.append(("jobs never started", [_num(m["never_started"]) for m in metrics]))
    rows.append(("— submit window —", ["" for _ in metrics]))
    rows.extend(
        (label, [fmt(get(m["submit_window"])) for m in metrics]) for label, get, fmt in figures
    )
    rows.append(("— whole replay —", ["" for _ in metrics]))
    rows.extend((label, [fmt(get(m)) for m in metrics]) for label, get, fmt in figures)
    return rows


def format_table(metrics: list[dict], markdown: bool = False) -> str:
    """The side-by-side comparison as plain text (or a Markdown table)."""
    rows = comparison_rows(metrics)
    if markdown:
        lines = [
            "| " + " | ".join(["figure", *rows[0][1]]) + " |",
            "|---" + "|---:" * len(metrics) + "|",
        ]
        for label, cells in rows[1:]:
            if label.startswith("—"):
                lines.append(f"| **{label.strip('— ')}** |" + " |" * len(metrics))
            else:
                lines.append("| " + " | ".join([label.strip(), *cells]) + " |")
        return "\n".join(lines)
    width = max(len(label) for label, _ in rows)
    col = max(12, *(len(c) for _, cells in rows for c in cells))
    return "\n".join(
        label.ljust(width) + "  " + "  ".join(c.rjust(col) for c in cells) for label, cells in rows
    )
