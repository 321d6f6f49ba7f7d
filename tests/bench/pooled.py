"""Pool the rounds of several benchmark runs and print each benchmark's median, p95 and p99.

A page measured beside the load harness is measured again and again while the harness runs
(each run of ``test_bench_dashboards.py`` takes about 16 s of a 300 s load run); one run's
p95 of 40 rounds is its second-slowest round, so it moves with a single slow request. The
pooled figure is the percentile of every round of every run, which is what a user beside
the load meets. Each run writes its rounds with ``--benchmark-json``:

    for i in $(seq 10); do make bench BENCH=tests/bench/test_bench_dashboards.py \\
        PYTEST_ARGS="--reuse-db --benchmark-json=var/bench/dashboards-$i.json"; done
    .venv/bin/python -m tests.bench.pooled var/bench/dashboards-*.json

Percentiles are nearest rank, as ``test_bench_dashboards.p95``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def nearest_rank(ordered: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``ordered`` (sorted ascending), nearest rank."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def pooled_rounds(paths: list[Path]) -> dict[str, list[float]]:
    """Every round's seconds per benchmark name over the JSON files, in name order."""
    rounds: dict[str, list[float]] = {}
    for path in paths:
        for bench in json.loads(path.read_text())["benchmarks"]:
            rounds.setdefault(bench["name"], []).extend(bench["stats"]["data"])
    return dict(sorted(rounds.items()))


def main(argv: list[str] | None = None) -> None:
    """Print one line per benchmark: runs pooled, rounds, median, p95, p99 and max in ms."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="pytest-benchmark JSON files")
    args = parser.parse_args(argv)
    for name, seconds in pooled_rounds(args.files).items():
        ordered = sorted(seconds)
        figures = "  ".join(
            f"{label} {nearest_rank(ordered, q) * 1000:6.1f} ms"
            for label, q in (("median", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
        )
        print(f"{name:55s} {len(args.files):3d} runs {len(ordered):5d} rounds  {figures}")


if __name__ == "__main__":
    main()
