"""Print a digest of every decision of a replay, to check that an engine change that
should only save time takes the same decisions.

Run: ``.venv/bin/python -m tests.bench.replay_digest fairshare:256 quota:512:20000`` — each
argument is ``policy:gpus[:first N jobs]``; each line printed is the argument, the digest
(SHA-256 of every run and preemption the replay recorded, first 16 hex digits), the wall
time in seconds and the number of cycles. Compare the digests of two commits. The bundled
Philly trace by default; ``--trace PATH`` before the arguments replays a canonical trace
with proportional budgets instead (as the other tools here).
"""

from __future__ import annotations

import hashlib
import sys
import time

from scheduler.simulator import ReplayConfig, load_budgets, load_trace, replay
from tests.bench.trace_source import PHILLY, TraceSource, from_args, run_spec


def digest(
    policy: str, gpus: int, jobs: int | None = None, source: TraceSource = PHILLY
) -> tuple[str, float, int]:
    """(digest, wall seconds, cycles) of the replay of ``source`` (its first ``jobs`` jobs)
    with ``policy`` on ``gpus`` GPUs."""
    trace = load_trace(source.path, source.format)
    if jobs:
        trace = trace.head(jobs)
    budgets = load_budgets(source.budgets, trace.jobs)
    began = time.perf_counter()
    result = replay(trace, budgets, ReplayConfig(gpus=gpus, policy=policy, record_runs=True))
    wall = time.perf_counter() - began
    text = repr(result.runs) + repr(result.preemptions)
    return hashlib.sha256(text.encode()).hexdigest()[:16], wall, result.cycles


def main(args: list[str]) -> None:
    """Print one line per ``policy:gpus[:jobs]`` argument (``--trace PATH`` first: that
    trace instead of Philly's)."""
    source, args = from_args(args)
    for spec in args:
        run = run_spec(spec)
        value, wall, cycles = digest(run.policy, run.gpus, run.first, source)
        print(f"{spec} {value} {wall:.1f} s {cycles} cycles", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
