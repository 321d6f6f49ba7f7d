"""Hour-by-hour accounting of a replay, and the sliding-window usage the engine ranks by.

Every project has three piecewise-constant rates — charged GPUs (running with a minimum
runtime above 0), free-lane GPUs (minimum runtime 0, never charged) and demand (GPUs of its
pending and running charged workloads: free-lane work asks for nothing owed, as in the live
loop's accounting). The ledger integrates them into hourly GPU-second buckets.
A project's buckets are brought up to date only when its rates change or an hour closes, so
an event costs O(1) and an hour boundary O(projects).

The sliding window is kept at hour granularity: the usage handed to the engine is the sum of
the buckets of the last ``ceil(window / 1 h)`` hours, the current partial hour included —
between ``window - 1 h`` and ``window`` of history.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

HOUR = 3600.0


class UsageLedger:
    """Hourly charged / free / demand GPU-seconds per project, plus the window's charged usage."""

    def __init__(
        self,
        projects: list[str],
        origin: float,
        window_seconds: float,
        prior: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        """``prior``: per project, charged GPU-seconds of each hour before ``origin``'s hour,
        oldest first, newest ending where the ledger begins (a replay that continues a real
        cluster's usage window). Only the hours the window still reaches count; they leave
        it as the replay's hours pass, like any other hour. Projects only in ``prior`` are
        added."""
        prior = prior or {}
        self.projects = list(projects) + sorted(set(prior) - set(projects))
        self.index = {p: i for i, p in enumerate(self.projects)}
        self.hour0 = math.floor(origin / HOUR) * HOUR
        self.window_hours = max(1, math.ceil(window_seconds / HOUR))
        n = len(self.projects)
        self.charged: list[list[float]] = [[0.0] for _ in range(n)]
        self.free: list[list[float]] = [[0.0] for _ in range(n)]
        self.demand: list[list[float]] = [[0.0] for _ in range(n)]
        self._charged_rate = [0] * n
        self._free_rate = [0] * n
        self._demand_rate = [0] * n
        self._since = [self.hour0] * n
        self._window = [0.0] * n
        self._hour = 0
        self._next_boundary = self.hour0 + HOUR
        # The window's hours before the origin: hour -k is ``self._prior[i][-k]``.
        reach = self.window_hours - 1
        self._prior: list[list[float]] = [[0.0] * reach for _ in range(n)]
        for project, hours in prior.items():
            i = self.index[project]
            kept = [float(x) for x in hours][-reach:] if reach else []
            self._prior[i][reach - len(kept) :] = kept
            self._window[i] = sum(kept)

    @property
    def hours(self) -> int:
        """Number of hourly buckets so far (the last one may be partial)."""
        return self._hour + 1

    def hour_start(self, h: int) -> float:
        """Start time of bucket ``h``."""
        return self.hour0 + h * HOUR

    def advance(self, t: float) -> None:
        """Close every hour that ends at or before ``t``; call before recording changes at ``t``."""
        while t >= self._next_boundary:
            boundary = self._next_boundary
            for i in range(len(self.projects)):
                self._flush(i, boundary)
            leaving = self._hour + 1 - self.window_hours
            for i in range(len(self.projects)):
                # Clamp: subtracting floats may leave -1e-9 behind.
                if leaving >= 0:
                    self._window[i] = max(0.0, self._window[i] - self.charged[i][leaving])
                elif self._prior[i][leaving]:
                    self._window[i] = max(0.0, self._window[i] - self._prior[i][leaving])
                self.charged[i].append(0.0)
                self.free[i].append(0.0)
                self.demand[i].append(0.0)
            self._hour += 1
            self._next_boundary = boundary + HOUR

    def _flush(self, i: int, t: float) -> None:
        dt = t - self._since[i]
        if dt > 0:
            h = self._hour
            if self._charged_rate[i]:
                used = self._charged_rate[i] * dt
                self.charged[i][h] += used
                self._window[i] += used
            if self._free_rate[i]:
                self.free[i][h] += self._free_rate[i] * dt
            if self._demand_rate[i]:
                self.demand[i][h] += self._demand_rate[i] * dt
        self._since[i] = t

    def change(
        self, project: str, t: float, *, charged: int = 0, free: int = 0, demand: int = 0
    ) -> None:
        """At time ``t`` (after ``advance(t)``), change the project's rates by these GPU deltas."""
        i = self.index[project]
        self._flush(i, t)
        self._charged_rate[i] += charged
        self._free_rate[i] += free
        self._demand_rate[i] += demand

    def usage(self, t: float) -> dict[str, float]:
        """Charged GPU-seconds per project over the sliding window ending at ``t``."""
        return {
            p: self._window[i] + self._charged_rate[i] * (t - self._since[i])
            for i, p in enumerate(self.projects)
        }

    def close(self, t: float) -> None:
        """Bring every bucket up to ``t`` (end of the replay)."""
        self.advance(t)
        for i in range(len(self.projects)):
            self._flush(i, t)

    def running_gpus(self) -> int:
        """GPUs allocated right now (charged and free lane)."""
        return sum(self._charged_rate) + sum(self._free_rate)
