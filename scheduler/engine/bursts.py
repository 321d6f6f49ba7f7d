"""A debug job's place in its submitter's burst (``Workload.burst_rank``).

Inside a project, debug-class work of one submitter that arrives in a burst (a sweep of
hundreds of short jobs) would otherwise queue a colleague's single debug job behind all of
it: the project's order is priority, minimum runtime, then submit time. The burst rank of a
debug-class workload is how many debug-class workloads the same submitter sent to the same
project in the ``window`` before it (one debug-class protection, ``debug_min_runtime``: what
arrives within that of each other is one burst). ``fairshare`` orders by it before submit
time, so the first job of every burst, and a lone job, go first; the hundredth job of a sweep
goes after the first of everyone else's. Drivers compute it when a workload is submitted
(the simulator with ``BurstRanker``; the live loop from its database, by the same rule) and
pass it in, so a rebuilt engine orders as the kept one did.
"""

from __future__ import annotations

from collections import deque


def counts_in_bursts(min_runtime: float, debug_min_runtime: float) -> bool:
    """Is work with this minimum runtime ranked in bursts? Charged debug-class work only."""
    return 0.0 < min_runtime <= debug_min_runtime


class BurstRanker:
    """Burst ranks of workloads submitted in time order, per (project, submitter)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._recent: dict[tuple[str, str], deque[float]] = {}

    def rank(self, project: str, submitter: str, submit_time: float, min_runtime: float) -> int:
        """The burst rank of a workload submitted now (0 outside the debug class)."""
        if not counts_in_bursts(min_runtime, self.window):
            return 0
        recent = self._recent.get((project, submitter))
        if recent is None:
            recent = self._recent[(project, submitter)] = deque()
        while recent and recent[0] <= submit_time - self.window:
            recent.popleft()
        rank = len(recent)
        recent.append(submit_time)
        return rank
