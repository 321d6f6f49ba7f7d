"""A synthetic variant of a real trace, for a second opinion on a policy.

A policy judged on one trace is tuned to it. ``variant`` keeps a real trace's arrival times
and run times (the hard part to make up) and changes what a policy is most sensitive to,
by documented, seeded rules (``docs/simulation.md``, "A second trace"):

1. **Other teams.** Jobs are dealt to ``len(team_weights)`` new teams with those weights
   (default eight teams of 30, 20, 15, 10, 10, 8, 5 and 2 %). Jobs one original team
   submitted within the same hour go to one new team, so bursts stay bursts.
2. **More gangs.** Of the jobs asking for exactly one node's worth of GPUs, ``gang_16``
   become 2-node gangs and ``gang_32`` 4-node gangs (same run time).
3. **Bursts of debug jobs.** Every day, one team (drawn by weight) submits ``burst_jobs``
   one-GPU jobs of 5-30 minutes within ten minutes, at a random hour.

``copies`` lays that many variants back to back in time (copy ``k`` uses seed ``seed + k``
and starts a day after copy ``k - 1``'s last submission): a trace of any length with the
source's load per hour, for measuring the replay at scale (eleven copies of Philly's variant
hold just over a million jobs).

The same input and seed give the same trace.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from scheduler.simulator.traces import CANONICAL_COLUMNS, Trace, TraceJob

DAY = 86400.0
HOUR = 3600.0


@dataclass(frozen=True)
class VariantRules:
    """The knobs of ``variant`` (see the module docstring)."""

    seed: int = 2026
    team_weights: Sequence[float] = (30, 20, 15, 10, 10, 8, 5, 2)
    gpus_per_node: int = 8
    gang_16: float = 0.15
    gang_32: float = 0.05
    burst_jobs: int = 100


def variant(trace: Trace, rules: VariantRules | None = None) -> Trace:
    """A new trace made from ``trace`` by the rules above (teams named ``team1`` ...)."""
    rules = rules or VariantRules()
    rng = random.Random(rules.seed)
    teams = [f"team{i + 1}" for i in range(len(rules.team_weights))]
    dealt: dict[tuple[str, int], str] = {}
    node = rules.gpus_per_node
    jobs: list[TraceJob] = []
    for job in trace.jobs:
        key = (job.project, int(job.submit_time // HOUR))
        team = dealt.get(key)
        if team is None:
            team = dealt[key] = rng.choices(teams, weights=rules.team_weights)[0]
        gpus = job.gpus
        if gpus == node:
            draw = rng.random()
            if draw < rules.gang_32:
                gpus = 4 * node
            elif draw < rules.gang_32 + rules.gang_16:
                gpus = 2 * node
        jobs.append(
            TraceJob(f"v{len(jobs) + 1}", job.submit_time, job.duration, gpus, team, line=job.line)
        )
    if trace.jobs:
        day = trace.start - trace.start % DAY
        while day < trace.last_submit:
            team = rng.choices(teams, weights=rules.team_weights)[0]
            at = day + rng.uniform(0, DAY - 600)
            for _ in range(rules.burst_jobs):
                submit = at + rng.uniform(0, 600)
                if trace.start <= submit <= trace.last_submit:
                    duration = rng.uniform(300, 1800)
                    jobs.append(TraceJob(f"v{len(jobs) + 1}", submit, duration, 1, team))
            day += DAY
    jobs.sort(key=lambda j: j.submit_time)
    return Trace(
        jobs=jobs,
        format="canonical",
        source=f"variant of {trace.source} (seed {rules.seed})",
        projects=sorted({j.project for j in jobs}),
    )


def copies(trace: Trace, count: int, rules: VariantRules | None = None) -> Trace:
    """``count`` variants of ``trace`` back to back in time (see the module docstring)."""
    if count < 1:
        raise ValueError(f"copies must be at least 1, not {count}")
    rules = rules or VariantRules()
    jobs: list[TraceJob] = []
    shift = 0.0
    for k in range(count):
        made = variant(trace, replace(rules, seed=rules.seed + k))
        for job in made.jobs:
            submit = job.submit_time + shift
            jobs.append(TraceJob(f"v{len(jobs) + 1}", submit, job.duration, job.gpus, job.project))
        if trace.jobs:
            shift += trace.last_submit - trace.start + DAY
    return Trace(
        jobs=jobs,
        format="canonical",
        source=f"{count} variants of {trace.source} (seeds {rules.seed}-{rules.seed + count - 1})",
        projects=sorted({j.project for j in jobs}),
    )


def write_canonical(trace: Trace, path: Path) -> Path:
    """Write ``trace`` as a canonical CSV (``simulate --format canonical`` reads it back)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(CANONICAL_COLUMNS)
        for job in trace.jobs:
            writer.writerow([job.id, f"{job.submit_time:.3f}", f"{job.duration:.3f}", job.gpus,
                             job.project, "", ""])  # fmt: skip
    return path
