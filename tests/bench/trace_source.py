"""Which trace a bench tool replays: the bundled Philly trace with its budgets, or, after
``--trace PATH`` on the command line, a canonical trace with budgets proportional to each
team's GPU-hours (``manage.py trace_variant`` writes one); and the one reading of the
``policy:gpus[:first N jobs]`` arguments the tools take."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from scheduler.simulator import ReplayConfig, load_budgets, load_trace
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


class RunSpec(NamedTuple):
    """One ``policy:gpus[:first N jobs]`` argument: what to replay, on how many GPUs."""

    policy: str
    gpus: int
    first: int | None  # only the trace's first N jobs; None: all of it

    def config(self) -> ReplayConfig:
        """The replay's configuration: this policy on this many GPUs, no per-run records."""
        return ReplayConfig(gpus=self.gpus, policy=self.policy, record_runs=False)


def run_spec(arg: str) -> RunSpec:
    """Read ``policy:gpus[:first N jobs]``; anything else stops the tool naming the argument."""
    policy, *numbers = arg.split(":")
    if not policy or len(numbers) not in (1, 2) or not all(n.isdecimal() for n in numbers):
        raise SystemExit(f"{arg!r}: expected policy:gpus[:first N jobs], as in fairshare:256:20000")
    return RunSpec(policy, int(numbers[0]), int(numbers[1]) if len(numbers) == 2 else None)


def first_jobs(trace: Trace, spec: RunSpec) -> Trace:
    """The part of ``trace`` ``spec`` replays."""
    return trace if spec.first is None else trace.head(spec.first)


def each_run(argv: list[str]) -> Iterator[tuple[str, Trace, Budget, ReplayConfig]]:
    """For a tool's command line (``--trace PATH`` first, else Philly, then
    ``policy:gpus[:first N jobs]`` arguments): each argument, the part of the trace it
    replays, the budgets, and its replay configuration. The trace is read once."""
    source, args = from_args(argv)
    trace, budgets = loaded(source)
    for arg in args:
        spec = run_spec(arg)
        yield arg, first_jobs(trace, spec), budgets, spec.config()


def each_variant_run(
    argv: list[str], variants: tuple[str, ...]
) -> Iterator[tuple[str, str, Trace, Budget, ReplayConfig]]:
    """As ``each_run``, for the tools that replay variants of ``fairshare``: each argument is
    ``variant:gpus[:first N jobs]`` with a variant of ``variants`` (anything else stops the
    tool naming the argument); the replay is ``fairshare`` on the reference path
    (``incremental=False``: the incremental engine's memos follow the product's rules, not a
    variant's). Yields the argument, its variant, the trace part, budgets and configuration."""
    source, args = from_args(argv)
    trace, budgets = loaded(source)
    for arg in args:
        spec = run_spec(arg)
        if spec.policy not in variants:
            raise SystemExit(
                f"{arg!r}: unknown variant {spec.policy!r}: one of {', '.join(variants)}"
            )
        config = ReplayConfig(
            gpus=spec.gpus, policy="fairshare", record_runs=False, incremental=False
        )
        yield arg, spec.policy, first_jobs(trace, spec), budgets, config
