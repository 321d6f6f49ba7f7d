"""Small traces shared by the simulator tests."""

import json
import os
import subprocess
import sys
from pathlib import Path

from scheduler.simulator import parse_budgets, read_trace

ROOT = Path(__file__).resolve().parents[2]

HEADER = "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"
T0 = 1483228800.0  # 2017-01-01T00:00:00Z, an hour boundary


def trace(*rows: str):
    """A canonical trace from ``id,submit,duration,gpus,project,min_runtime,resumable`` rows
    whose submit time is seconds after T0."""
    lines = []
    for row in rows:
        jid, submit, rest = row.split(",", 2)
        lines.append(f"{jid},{T0 + float(submit)},{rest}\n")
    return read_trace(HEADER + "".join(lines))


def two_teams(a=50, b=50):
    """org -> A (a %), B (b %)."""
    return parse_budgets(
        {
            "name": "org",
            "share": 100,
            "children": [{"name": "A", "share": a}, {"name": "B", "share": b}],
        }
    )


def run_plain_python(script: str) -> dict:
    """Run ``script`` in a child process on the plain-Python engine (``ENGINE_NATIVE=0``)
    from the repository's root; the JSON object its last line of output prints.

    For the bench tools that wrap the engine's or the replay loop's methods: this process
    may have loaded the compiled engine, whose classes cannot be wrapped.
    """
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "ENGINE_NATIVE": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])
