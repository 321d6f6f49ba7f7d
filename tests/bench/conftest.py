"""Benchmark reporting: after pytest-benchmark's table, one line per benchmark with its
median, the target it is judged against, and the ratio median ÷ target (≤ 1.00 meets it).

A benchmark declares its target with ``benchmark.extra_info["target_seconds"] = …``; other
figures it records in ``extra_info`` (jobs per second, sizes) are printed beside it. One
judged on another figure than the median of its rounds (a p95 over every request of a load
run) records it as ``judged_seconds`` and names it in ``judged`` ("p95"); that figure is
printed and compared instead. The summary also prints the machine's speed before and after
the run (``tests/bench/machine_speed.py``), so a median can be read against the machine it
came from. Nothing here asserts on time: benchmarks measure, tests judge behaviour.
"""

from __future__ import annotations

import pytest

from tests.bench.machine_speed import describe, empty_loop_seconds

_SPEED_AT_START: list[float] = []


def pytest_sessionstart(session) -> None:
    """Time the machine before the first benchmark (printed in the summary)."""
    _SPEED_AT_START.append(empty_loop_seconds())


def _format_extra(extra: dict) -> str:
    shown = {
        k: v for k, v in extra.items() if k not in ("target_seconds", "judged", "judged_seconds")
    }
    parts = []
    for key, value in sorted(shown.items()):
        parts.append(f"{key}={value:,.1f}" if isinstance(value, float) else f"{key}={value}")
    return "  ".join(parts)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Print median, target and ratio for every benchmark that ran."""
    session = getattr(config, "_benchmarksession", None)
    benchmarks = [b for b in (session.benchmarks if session else []) if b]
    if not benchmarks:
        return
    terminalreporter.section("benchmark medians against targets")
    for when, seconds in (("before", _SPEED_AT_START[:1]), ("after", [empty_loop_seconds()])):
        for value in seconds:
            terminalreporter.write_line(f"{when} the run, {describe(value)}")
    for bench in benchmarks:
        figure = bench.extra_info.get("judged_seconds", bench.stats.median)
        label = bench.extra_info.get("judged", "median")
        target = bench.extra_info.get("target_seconds")
        ratio = f"{figure / target:5.2f}" if target else "  n/a"
        target_text = f"{target * 1000:10.1f} ms" if target else "        —   "
        terminalreporter.write_line(
            f"{bench.name:<55} {label:<6} {figure * 1000:10.1f} ms  target {target_text}  "
            f"ratio {ratio}  {_format_extra(bench.extra_info)}"
        )
