"""What the node agent tells the server of its runs' GPU use: sample, meter, report.

The agent loop calls ``UtilizationReporter.tick`` every pass with the GPUs each of its
processes holds; the reporter samples the GPUs when a sample is due (``telemetry.py``),
closes a period when a report is due, and keeps the periods until the server has stored them
(``flush``). A node without GPU telemetry gets no reporter at all: the server then knows
nothing of its runs' use, which is what "no GPU telemetry" means, never a made-up 0 %.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from scheduler.agent.telemetry import RunUtilization, RunUtilizationMeter, Sampler

logger = logging.getLogger(__name__)

# The server stores at most this many periods per call; older ones are dropped beyond
# ``MAX_PENDING`` (a server away for hours costs utilization detail, never the agent's memory).
BATCH = 1000
MAX_PENDING = 10_000
DECIMALS = 6  # the server keeps GPU-seconds to the microsecond


class UtilizationReporter:
    """Samples every ``sample_seconds``, reports every ``report_seconds`` (monotonic clock).

    Periods carry wall-clock times derived from the monotonic clock (the wall time at the
    reporter's start plus monotonic seconds since), so a period's length always equals the
    seconds the meter counted in it, even when the wall clock is stepped meanwhile: the
    server refuses more allocated GPU-seconds than GPUs x the period's length.
    """

    def __init__(
        self,
        sampler: Sampler,
        *,
        sample_seconds: float = 5.0,
        report_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.sampler = sampler
        self.sample_seconds = sample_seconds
        self.report_seconds = report_seconds
        self.clock = clock
        self.meter = RunUtilizationMeter()
        now = clock()
        self._origin = (now, wall())  # (monotonic, wall) at the reporter's start
        self._period_start = now
        self._next_sample = now
        self._next_report = now + report_seconds
        self._run_start: dict[str, float] = {}  # monotonic time each run was first seen
        self._stopped: set[str] = set()  # runs ended this period (reported, then forgotten)
        self.pending: list[dict] = []

    def tick(self, running: Mapping[str, Sequence[str]]) -> None:
        """Follow the runs (``{run key: GPU indices}``), sample and close a period when due."""
        now = self.clock()
        self._follow(running, now)
        if now >= self._next_sample:
            self.meter.add_samples(self.sampler.sample(), now)
            self._next_sample = now + self.sample_seconds
        if now >= self._next_report:
            self._close_period(now)
            self._next_report = now + self.report_seconds

    def flush(self, send: Callable[[list[dict]], object], refused: type[Exception]) -> None:
        """Send the kept periods in batches with ``send``; a batch the server refuses
        (``refused``: bad data, a run it no longer knows) is dropped and logged, anything
        else it raises (the server away) leaves the periods for the next contact."""
        while self.pending:
            batch = self.pending[:BATCH]
            try:
                send(batch)
            except refused as exc:
                logger.warning("utilization of %d period(s) refused: %s", len(batch), exc)
            del self.pending[: len(batch)]

    # --- internals ------------------------------------------------------------------------
    def _follow(self, running: Mapping[str, Sequence[str]], now: float) -> None:
        for key in [k for k in self._run_start if k not in running and k not in self._stopped]:
            self.meter.stop_run(key, now)
            self._stopped.add(key)
        for key, gpus in running.items():
            if gpus and (key not in self._run_start or key in self._stopped):
                self._stopped.discard(key)
                self.meter.start_run(key, gpus, now)
                self._run_start[key] = now

    def _close_period(self, now: float) -> None:
        for key, use in self.meter.take(now).items():
            if use.allocated_gpu_seconds <= 0 or not key.isdigit():
                continue
            # The meter counted the run from the later of the period's start and the run's,
            # for ``period_seconds``: until now, or until it ended.
            first = max(self._period_start, self._run_start.get(key, self._period_start))
            end = min(now, first + use.period_seconds)
            self.pending.append(_report(int(key), self._wall(first), self._wall(end), use))
        for key in self._stopped:
            self._run_start.pop(key, None)
        self._stopped.clear()
        self._period_start = now
        if len(self.pending) > MAX_PENDING:
            dropped = len(self.pending) - MAX_PENDING
            del self.pending[:dropped]
            logger.warning("dropped %d utilization period(s) the server did not take", dropped)

    def _wall(self, monotonic: float) -> datetime:
        mono0, wall0 = self._origin
        return datetime.fromtimestamp(wall0 + (monotonic - mono0), UTC)


def _report(run: int, start: datetime, end: datetime, use: RunUtilization) -> dict:
    """One period as the server's ``agent/utilization/`` takes it."""
    allocated = round(use.allocated_gpu_seconds, DECIMALS)
    busy = use.busy_gpu_seconds
    return {
        "run": run,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "allocated_gpu_seconds": f"{allocated:.{DECIMALS}f}",
        # Rounded on its own, busy could pass allocated by the last digit.
        "busy_gpu_seconds": None
        if busy is None
        else f"{min(round(busy, DECIMALS), allocated):.{DECIMALS}f}",
        "samples": use.sample_count,
        "memory_max_mib": use.max_memory_used_mib,
        "power_mean_watts": None if use.mean_power_watts is None else f"{use.mean_power_watts:.3f}",
    }
