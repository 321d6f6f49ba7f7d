"""The scheduling contract a replayed job gets when its trace does not state one.

Real traces rarely record a minimum runtime or whether a job can resume. The default rule
(documented in ``docs/simulation.md``):

- a *debug* workload — at most 2 GPUs and at most 1 h long — gets a 15-minute minimum runtime;
- every other workload gets 2 h;
- any minimum (stated or default) is capped at ``max_min_runtime`` (8 h by default, Ai2's cap);
- workloads are resumable unless the trace says otherwise.

``debug`` is also how queue-wait figures are split (``debug`` vs ``other``), whatever minimum
the trace states, so figures stay comparable between traces.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.simulator.traces import TraceJob


@dataclass(frozen=True)
class ContractRule:
    """Defaults for minimum runtime and resumability; every threshold is configurable."""

    debug_max_gpus: int = 2
    debug_max_duration: float = 3600.0
    debug_min_runtime: float = 15 * 60.0
    other_min_runtime: float = 2 * 3600.0
    max_min_runtime: float = 8 * 3600.0
    default_resumable: bool = True

    def is_debug(self, job: TraceJob) -> bool:
        """True for small, short work: ≤ ``debug_max_gpus`` GPUs and ≤ ``debug_max_duration``."""
        return job.gpus <= self.debug_max_gpus and job.duration <= self.debug_max_duration

    def min_runtime(self, job: TraceJob) -> float:
        """The trace's minimum runtime if it has one, else the default rule; capped either way."""
        if job.min_runtime is not None:
            value = job.min_runtime
        elif self.is_debug(job):
            value = self.debug_min_runtime
        else:
            value = self.other_min_runtime
        return min(value, self.max_min_runtime)

    def resumable(self, job: TraceJob) -> bool:
        """The trace's flag if present, else ``default_resumable``."""
        return self.default_resumable if job.resumable is None else job.resumable
