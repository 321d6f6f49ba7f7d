"""Which trace a bench tool replays: the bundled Philly trace with its budgets, or, after
``--trace PATH`` on the command line, a canonical trace with budgets proportional to each
team's GPU-hours (``manage.py trace_variant`` writes one)."""

from __future__ import annotations

from typing import NamedTuple

from scheduler.simulator import load_budgets, load_trace
from scheduler.simulator.budgets import Budget
from scheduler.simulator.traces import Trace
from scheduler.traces import PHILLY_BUDGETS, PHILLY_JOBS


class TraceSource(NamedTuple):
    """A trace's path, format and budgets (a budgets file or ``proportional``)."""

    path: str
    format: str
    budgets: str


PHILLY = TraceSource(str(PHILLY_JOBS), "philly", str(PHILLY_BUDGETS))


def from_args(args: list[str]) -> tuple[TraceSource, list[str]]:
    """The trace ``args`` name (``--trace PATH`` first) and the arguments after it."""
    if args[:1] == ["--trace"]:
        if len(args) < 2:
            raise SystemExit("--trace needs the path of a canonical trace")
        return TraceSource(args[1], "canonical", "proportional"), args[2:]
    return PHILLY, args


def loaded(source: TraceSource) -> tuple[Trace, Budget]:
    """The trace ``source`` names, read, and its budgets."""
    trace = load_trace(source.path, source.format)
    return trace, load_budgets(source.budgets, trace.jobs)
