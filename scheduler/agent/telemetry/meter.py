"""Per-run sums of GPU samples: ``RunUtilizationMeter`` turns what the samplers read into
each run's busy and allocated GPU-seconds."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scheduler.agent.telemetry.samples import GpuSample

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunUtilization:
    """One run's GPU use over one period (between two ``take`` calls, or part of it).

    ``busy_gpu_seconds`` is None when no busy reading covered any of the period ("no
    telemetry"), never 0. ``observed_gpu_seconds`` is the part of ``allocated_gpu_seconds``
    a busy reading covered: busy / observed is the busy fraction of what was measured.
    """

    period_seconds: float
    allocated_gpu_seconds: float
    busy_gpu_seconds: float | None
    observed_gpu_seconds: float
    sample_count: int
    max_memory_used_mib: int | None
    mean_power_watts: float | None


@dataclass
class _RunTotals:
    seconds: float = 0.0
    allocated: float = 0.0
    busy: float = 0.0
    observed: float = 0.0
    samples: int = 0
    max_memory: int | None = None
    power_sum: float = 0.0
    power_count: int = 0


@dataclass
class RunUtilizationMeter:
    """Busy and allocated GPU-seconds per run, from the samples the agent feeds it.

    Integration rule: a GPU's busy reading holds from its sample's time until the next sample
    of that GPU (or until the run lets the GPU go). Busy GPU-seconds are the sum over the
    run's GPUs of busy fraction x seconds held. A GPU's reading is forgotten when a run
    starts on it, so a run is never credited with its predecessor's work: until its first
    sample, a GPU counts as allocated but not observed. A reading of None (the GPU did not
    report) holds in the same way and covers nothing. Periods end at ``take(now)``; a reading
    held across a ``take`` is split between the two periods, so one take or two over the
    same time give the same sums. Memory (max) and power (mean per GPU) come from the samples
    taken while the run held the GPU. Times are ``time.monotonic()`` seconds; a time earlier
    than the last one seen counts as that last one (a late sample does not rewrite a period
    already taken).
    """

    _now: float | None = None
    _gpus: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _holder: dict[str, str] = field(default_factory=dict)
    _busy: dict[str, float | None] = field(default_factory=dict)
    _totals: dict[str, _RunTotals] = field(default_factory=dict)

    def start_run(self, run_id: str, gpus: Sequence[str], now: float) -> None:
        """The run's process started on ``gpus`` at ``now``. Idempotent for the same GPUs."""
        gpus = tuple(str(g) for g in gpus)
        if run_id in self._gpus:
            if self._gpus[run_id] != gpus:
                raise ValueError(f"run {run_id} already holds GPUs {list(self._gpus[run_id])}")
            return
        taken = [g for g in gpus if g in self._holder]
        if taken:
            raise ValueError(f"GPUs {taken} are held by run {self._holder[taken[0]]}")
        self._advance(now)
        self._gpus[run_id] = gpus
        self._totals.setdefault(run_id, _RunTotals())
        for g in gpus:
            self._holder[g] = run_id
            self._busy[g] = None

    def stop_run(self, run_id: str, now: float) -> None:
        """The run's process ended at ``now``; its last part is in the next ``take``."""
        if run_id not in self._gpus:
            return
        self._advance(now)
        for g in self._gpus.pop(run_id):
            del self._holder[g]

    def add_samples(self, samples: Iterable[GpuSample], now: float) -> None:
        """Record readings taken at ``now``; GPUs no run holds are not counted."""
        self._advance(now)
        for s in samples:
            busy = s.busy_percent
            if busy is not None and not 0 <= busy <= 100:
                logger.warning("GPU %s reported busy %s %%: ignored", s.index, busy)
                busy = None
            self._busy[s.index] = None if busy is None else busy / 100
            run_id = self._holder.get(s.index)
            if run_id is None:
                continue
            totals = self._totals[run_id]
            totals.samples += 1
            if s.memory_used_mib is not None:
                totals.max_memory = max(totals.max_memory or 0, s.memory_used_mib)
            if s.power_watts is not None:
                totals.power_sum += s.power_watts
                totals.power_count += 1

    def take(self, now: float) -> dict[str, RunUtilization]:
        """Each run's use since the last take (runs stopped meanwhile included, then dropped)."""
        self._advance(now)
        out = {
            run_id: RunUtilization(
                period_seconds=t.seconds,
                allocated_gpu_seconds=t.allocated,
                busy_gpu_seconds=t.busy if t.observed > 0 else None,
                observed_gpu_seconds=t.observed,
                sample_count=t.samples,
                max_memory_used_mib=t.max_memory,
                mean_power_watts=t.power_sum / t.power_count if t.power_count else None,
            )
            for run_id, t in self._totals.items()
        }
        self._totals = {run_id: _RunTotals() for run_id in self._gpus}
        return out

    def _advance(self, now: float) -> None:
        """Credit the time since the last event to the runs, with the readings then held."""
        if self._now is None or now <= self._now:
            self._now = now if self._now is None else self._now
            return
        dt = now - self._now
        self._now = now
        for run_id, gpus in self._gpus.items():
            totals = self._totals[run_id]
            totals.seconds += dt
            totals.allocated += dt * len(gpus)
            for g in gpus:
                busy = self._busy.get(g)
                if busy is not None:
                    totals.observed += dt
                    totals.busy += busy * dt
