"""Run a script in a child process on the plain-Python engine (``ENGINE_NATIVE=0``).

For tests that compare the native build with plain Python, and for the bench tools that wrap
the engine's or the replay loop's methods: this process may have loaded the compiled engine,
whose classes cannot be wrapped.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def plain_python_process(args: list[str]) -> subprocess.CompletedProcess:
    """``python ARGS`` run to its end from the repository's root with the native build off
    (its output captured as text, whatever its exit status)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, "ENGINE_NATIVE": "0"},
        capture_output=True,
        text=True,
    )


def run_plain_python(script: str) -> str:
    """What ``script`` printed, run from the repository's root with the native build off."""
    done = plain_python_process(["-c", script])
    assert done.returncode == 0, done.stderr
    return done.stdout


def plain_python_json(script: str) -> dict:
    """The JSON object the last line of ``script``'s output holds (``run_plain_python``)."""
    return json.loads(run_plain_python(script).strip().splitlines()[-1])
