"""How busy the simulated executor's workloads keep their GPUs: a deterministic rule.

A real node agent measures its runs' GPUs (``scheduler/agent``). The simulated executor has
nothing to measure, so it plays this rule instead, in three kinds of workload:

- **debug** (the simulator's contract rule: at most 2 GPUs and at most 1 h of declared
  work): *bursty*. Simulated time is cut into 10-minute slots; each slot opens with a burst
  at 90 % busy lasting 5 to 35 % of the slot, and the rest is 2 % busy: 6 to 33 % on
  average over a slot, mostly low.
- of the other workloads a fixed share (``IDLE_SHARE``, 15 %) *holds its GPUs without using
  them*: busy like the rest during a start-up of 5 to 20 minutes, then 0 to 2 % busy until
  it ends (the allocation the idle rule exists to find).
- the rest run *busy*: a steady level of 70 to 95 % per workload, moved by at most 4 points
  from one slot to the next.

Every draw (the kind, the levels, the start-up, each slot's burst or variation) is a hash of
the workload's id with a name for the draw, never a global random generator: a workload is
as busy in every step, every process and every replay. Times are simulated seconds since the
run started (wall seconds times ``SIMULATED_EXECUTOR_SPEEDUP``), so a run started again
starts up again. Pure Python, no database: ``simulated_utilization.py`` reports it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from enum import StrEnum

from scheduler.simulator.contract import ContractRule

SLOT = 600.0  # simulated seconds: a burst (debug) or a small variation (busy) per slot
IDLE_SHARE = 0.15  # of the non-debug workloads
STARTUP_SECONDS = (300.0, 1200.0)  # an idle workload's busy start-up
BUSY_LEVEL = (0.70, 0.95)  # a busy workload's (and an idle one's start-up) level
BUSY_VARIATION = 0.04  # at most this far from the level, per slot
IDLE_LEVEL = (0.0, 0.02)  # an idle workload after its start-up
BURST_LEVEL = 0.90
BURST_SHARE = (0.05, 0.35)  # of each slot, a debug session's burst
BETWEEN_BURSTS = 0.02


class Behaviour(StrEnum):
    """The three kinds of workload of the rule (see the module docstring)."""

    BURSTY = "bursty"
    IDLE = "idle"
    BUSY = "busy"


def _unit(workload_id: int, draw: str, slot: int = 0) -> float:
    """A number in [0, 1) that depends only on the workload, the draw's name and the slot."""
    digest = hashlib.blake2b(f"{workload_id}/{draw}/{slot}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _between(bounds: tuple[float, float], unit: float) -> float:
    low, high = bounds
    return low + (high - low) * unit


@dataclass(frozen=True)
class UtilizationProfile:
    """One workload's place in the rule: its kind and the levels drawn for it."""

    workload_id: int
    behaviour: Behaviour
    level: float  # busy: the steady level; idle: the start-up level; bursty: unused
    idle_level: float  # idle: after the start-up; bursty: between bursts
    startup: float  # idle: simulated seconds of start-up; 0 for the others

    def busy_fraction(self, t: float) -> float:
        """The GPUs' busy fraction at simulated second ``t`` of the run (0 to 1)."""
        t = max(0.0, t)
        if self.behaviour == Behaviour.IDLE:
            return self.level if t < self.startup else self.idle_level
        slot = int(t // SLOT)
        if self.behaviour == Behaviour.BUSY:
            return self._slot_level(slot)
        return BURST_LEVEL if t - slot * SLOT < self._burst(slot) else self.idle_level

    def busy_seconds(self, t0: float, t1: float) -> float:
        """Busy seconds of one GPU over simulated seconds [t0, t1] of the run: the exact
        integral of ``busy_fraction`` (so two adjoining spans add up to their union)."""
        t0, t1 = max(0.0, float(t0)), max(0.0, float(t1))
        if t1 <= t0:
            return 0.0
        if self.behaviour == Behaviour.IDLE:
            before = max(0.0, min(t1, self.startup) - t0)
            return before * self.level + (t1 - t0 - before) * self.idle_level
        total = 0.0
        for slot in range(int(t0 // SLOT), math.ceil(t1 / SLOT)):
            start = slot * SLOT
            a, b = max(t0, start), min(t1, start + SLOT)
            if b <= a:
                continue
            if self.behaviour == Behaviour.BUSY:
                total += (b - a) * self._slot_level(slot)
            else:
                burst_end = start + self._burst(slot)
                busy = max(0.0, min(b, burst_end) - a)
                total += busy * BURST_LEVEL + (b - a - busy) * self.idle_level
        return total

    def mean(self, t0: float, t1: float) -> float:
        """The mean busy fraction over simulated seconds [t0, t1] (0 for an empty span)."""
        if t1 <= t0:
            return 0.0
        return min(1.0, max(0.0, self.busy_seconds(t0, t1) / (t1 - t0)))

    def _slot_level(self, slot: int) -> float:
        shift = (2 * _unit(self.workload_id, "variation", slot) - 1) * BUSY_VARIATION
        return min(1.0, max(0.0, self.level + shift))

    def _burst(self, slot: int) -> float:
        return SLOT * _between(BURST_SHARE, _unit(self.workload_id, "burst", slot))


def utilization_profile(
    *, workload_id: int, gpus: int, declared_seconds: float
) -> UtilizationProfile:
    """Where the workload ``workload_id`` (``gpus`` GPUs, ``declared_seconds`` of simulated
    work) falls in the rule, and the levels drawn for it."""
    contract = ContractRule()
    if gpus <= contract.debug_max_gpus and declared_seconds <= contract.debug_max_duration:
        return UtilizationProfile(workload_id, Behaviour.BURSTY, BURST_LEVEL, BETWEEN_BURSTS, 0.0)
    level = _between(BUSY_LEVEL, _unit(workload_id, "level"))
    if _unit(workload_id, "kind") < IDLE_SHARE:
        idle = _between(IDLE_LEVEL, _unit(workload_id, "idle level"))
        startup = _between(STARTUP_SECONDS, _unit(workload_id, "startup"))
        return UtilizationProfile(workload_id, Behaviour.IDLE, level, idle, startup)
    return UtilizationProfile(workload_id, Behaviour.BUSY, level, 0.0, 0.0)
