"""The line of figures the tools that replay variants of ``fairshare`` print for each run
(``debug_reclaim``, ``debug_patience``, ``guarantee_gang_holds``): the submit window's
delivery, occupancy and waits, and the whole replay's churn; and the loop those tools share
(``print_variant_runs``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from scheduler.simulator import compute_metrics, replay
from tests.bench.trace_source import each_variant_run


def figures_line(metrics: dict) -> str:
    """``metrics`` (``compute_metrics`` of one replay) as one line of the figures the bars
    judge."""
    window = metrics["submit_window"]
    waits = window["queue_wait_seconds"]
    return (
        f"hourly delivery {window['hourly_delivery_ratio']:.1%}, worst team "
        f"{window['worst_team_delivery_ratio']:.1%}, hourly "
        f"{window['worst_team_hourly_delivery_ratio']:.1%}, occupancy at over-demand "
        f"{window['occupancy_when_oversubscribed']:.1%}, debug p50 "
        f"{waits['debug']['p50'] / 60:.1f} min, p90 {waits['debug']['p90'] / 60:.1f} min, other "
        f"p90 {waits['other']['p90'] / 3600:.1f} h, gang p50 {waits['gang']['p50'] / 3600:.1f} h, "
        f"p90 {waits['gang']['p90'] / 3600:.1f} h; whole replay: "
        f"{metrics['preemptions']:,} preemptions, "
        f"{metrics['lost_fraction_of_charged']:.2%} of charged lost"
    )


def print_variant_runs(
    args: list[str],
    variants: tuple[str, ...],
    install: Callable[[str], None],
    wake_at_timers: bool = False,
    more: Callable[[dict], str] | None = None,
) -> None:
    """Replay each ``variant:gpus[:first N jobs]`` argument (``--trace PATH`` first: another
    trace) with ``install(variant)`` in place and print its ``figures_line``; the first of
    ``variants`` (the product's rules) is put back at the end. ``wake_at_timers``: the
    replays also cycle at the engine's timers (``ReplayConfig.wake_at_timers``). ``more``:
    a tool's own figures of the metrics, printed after the line's, after a semicolon."""
    for arg, variant, trace, budgets, config in each_variant_run(args, variants):
        install(variant)
        config = dataclasses.replace(config, wake_at_timers=wake_at_timers)
        metrics = compute_metrics(replay(trace, budgets, config))
        line = f"{arg}: {figures_line(metrics)}"
        print(f"{line}; {more(metrics)}" if more else line, flush=True)
    install(variants[0])
