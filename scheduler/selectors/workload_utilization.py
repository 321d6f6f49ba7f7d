"""A workload's GPU utilization for its page: each run's hourly trace from the agents.

Built on ``scheduler.selectors.utilization.run_utilization_trace`` (one run's hours, all its
nodes summed). Hours without telemetry have no point: a gap, never 0 % busy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from scheduler.models import Run
from scheduler.selectors.utilization import BusyAllocatedFigures, run_utilization_trace

ZERO = Decimal("0")
# The page draws the latest runs only: a workload preempted fifty times would otherwise
# read fifty traces (two queries each) for lines nobody can tell apart.
RUNS_SHOWN = 5


@dataclass
class RunTrace(BusyAllocatedFigures):
    """One run's hours with telemetry and their sums."""

    run: Run
    hours: list[dict] = field(default_factory=list)

    @property
    def allocated_gpu_seconds(self) -> Decimal:
        """GPU-seconds allocated over the measured hours."""
        return sum((h["allocated_gpu_seconds"] for h in self.hours), ZERO)

    @property
    def busy_gpu_seconds(self) -> Decimal:
        """GPU-seconds busy over the measured hours."""
        return sum((h["busy_gpu_seconds"] for h in self.hours), ZERO)


def workload_utilization_traces(*, runs: list[Run]) -> list[RunTrace]:
    """The traces of the latest ``RUNS_SHOWN`` of ``runs``, oldest first (the chart reads
    left to right). The caller has checked the viewer sees the workload."""
    latest = sorted(runs, key=lambda r: r.attempt, reverse=True)[:RUNS_SHOWN]
    return [RunTrace(run=run, hours=run_utilization_trace(run=run)) for run in reversed(latest)]
