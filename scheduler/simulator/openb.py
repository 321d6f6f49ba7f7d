"""Alibaba's "openb" GPU pod list (``cluster-trace-gpu-v2023``) as a trace the replay reads:
a second opinion from another company's production cluster.

The pod list (``openb_pod_list_default.csv``: 8,152 pods over 149 days, published for
research use with the "Beware of Fragmentation" paper, USENIX ATC 2023) is not shipped with
the product; ``manage.py trace_openb`` converts a copy the user fetched. The rules, each
stated in ``docs/simulation.md`` beside the figures:

- a pod with no GPU (CPU-only) is not a job of this cluster: dropped;
- a pod that was never scheduled has no run time to replay: dropped;
- a pod asking a fraction of a GPU (``gpu_milli`` below 1000) counts as one whole GPU: the
  engine allocates whole GPUs, so the trace's demand is overstated by those fractions;
- a job is submitted at the pod's ``creation_time`` and runs for ``deletion_time -
  scheduled_time`` (pods still running when the trace ends are cut there, as in the trace);
- the trace names no team, so each pod is dealt to one of ``teams`` teams by a hash of its
  name, the k-th team taking a part proportional to 1/k (Zipf: 8 teams get 37, 18, 12, 9,
  7, 6, 5 and 5 %). A hash, not a random draw: the same pod lands in the same team on every
  machine and every run.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.simulator.traces import Trace, TraceError, TraceJob, parse_number, parse_time

OPENB_COLUMNS = ("name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time")


@dataclass
class Converted:
    """The trace made of the pods, and how many pods each rule dropped."""

    trace: Trace
    cpu_only: int
    never_scheduled: int
    shared_gpu: int  # pods asking a fraction of a GPU, counted as one GPU


def team_of(name: str, teams: int) -> str:
    """The team a pod named ``name`` is dealt to: ``team1`` … ``team<teams>``, the k-th
    taking a part proportional to 1/k of the pods (by a hash of the name)."""
    weights = [1.0 / k for k in range(1, teams + 1)]
    point = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") / 2**64
    point *= sum(weights)
    for k, weight in enumerate(weights, start=1):
        if point < weight:
            return f"team{k}"
        point -= weight
    return f"team{teams}"


def _whole(row: dict, name: str) -> int:
    """The whole number ≥ 0 in column ``name`` (the trace's parser for numbers), or
    ValueError naming the column."""
    text = row.get(name) or ""
    value = parse_number(text, name)
    if value != int(value) or value < 0:
        raise ValueError(f"{name} must be a whole number ≥ 0, found {text.strip()!r}")
    return int(value)


def openb_trace(lines: Iterable[str], *, teams: int = 8, source: str = "openb") -> Converted:
    """Read an openb pod list (CSV text) into a ``Trace`` by the module's rules.

    Raises ``TraceError`` naming the line for a missing column or a bad value."""
    if teams < 1:
        raise TraceError("teams must be at least 1", source=source)
    reader = csv.DictReader(lines)
    missing = [c for c in OPENB_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(f"header lacks column(s) {', '.join(missing)}", line=1, source=source)
    jobs: list[TraceJob] = []
    cpu_only = never_scheduled = shared = 0
    for row in reader:
        line = reader.line_num
        try:
            name = (row.get("name") or "").strip()
            if not name:
                raise ValueError("name is empty")
            gpus = _whole(row, "num_gpu")
            if gpus == 0:
                cpu_only += 1
                continue
            if not (row.get("scheduled_time") or "").strip():
                never_scheduled += 1
                continue
            created = parse_time(row.get("creation_time") or "", "creation_time")
            started = parse_time(row["scheduled_time"], "scheduled_time")
            ended = parse_time(row.get("deletion_time") or "", "deletion_time")
            if ended < started:
                raise ValueError("deletion_time is before scheduled_time")
            if (row.get("gpu_milli") or "").strip() and _whole(row, "gpu_milli") < 1000:
                shared += 1
        except ValueError as exc:
            raise TraceError(str(exc), line=line, source=source) from None
        job = TraceJob(name, created, ended - started, gpus, team_of(name, teams), line=line)
        jobs.append(job)
    jobs.sort(key=lambda j: (j.submit_time, j.line))
    trace = Trace(
        jobs=jobs, format="canonical", source=source, projects=sorted({j.project for j in jobs})
    )
    return Converted(trace, cpu_only, never_scheduled, shared)
