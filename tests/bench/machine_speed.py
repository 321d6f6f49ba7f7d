"""How fast this machine runs plain Python right now, so a benchmark figure can be read.

The same code took 11 s on one day and 47 s on another machine of the same kind: a median
means little without the speed of the machine it came from. ``empty_loop_seconds`` times the
figure ``docs/benchmarks.md`` quotes for every run: a 10-million-step empty ``for`` loop at a
script's top level in CPython, best of three. The targets were set where it took 0.18 to 0.29 s.

Run alone: ``.venv/bin/python -m tests.bench.machine_speed``.
"""

from __future__ import annotations

import time

STEPS = 10_000_000
REFERENCE_SECONDS = (0.18, 0.29)


def empty_loop_seconds(steps: int = STEPS, repeats: int = 3) -> float:
    """The fastest of ``repeats`` timings of an empty ``for`` loop of ``steps`` steps.

    The loop runs as a script's top level does (its variable a global), as the quoted
    figure was taken with ``python -c``; inside a function the same loop takes about half.
    """
    code = compile(f"for _ in range({steps}):\n    pass\n", "<empty loop>", "exec")
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        exec(code, {})  # a constant loop written above, timed as a script runs it
        best = min(best, time.perf_counter() - began)
    return best


def describe(seconds: float) -> str:
    """One line naming the loop's time beside the one on the targets' machine."""
    low, high = REFERENCE_SECONDS
    line = (
        f"machine speed: {STEPS:,}-step empty loop {seconds:.2f} s "
        f"(the targets were set where it took {low:.2f} to {high:.2f} s)"
    )
    if seconds > high:
        line += f"; this machine runs {seconds / high:.1f} to {seconds / low:.1f} times slower"
    return line


if __name__ == "__main__":
    print(describe(empty_loop_seconds()))
