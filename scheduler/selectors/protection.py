"""When a running workload may be evicted: one rule for every page, the engine's own.

The engine caps minimum runtimes (``PolicyParams.max_min_runtime``) and, for a workload that
was preempted before, protects its next run longer (the churn budget,
``scheduler.engine.records.protection_seconds``); the live cycle records the result on the
run (``Run.protected_until``). A draining node evicts a run once its capped minimum runtime
has passed, whatever the churn budget says. The free lane (minimum runtime 0) is never
protected.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler.engine import PolicyParams

_CAP_SECONDS = PolicyParams().max_min_runtime


def drain_due_at(*, started_at: datetime, min_runtime_seconds: int) -> datetime | None:
    """When a draining node may evict the run: its start plus its minimum runtime as the
    engine caps it. ``None`` for the free lane (evicted at the next cycle)."""
    if min_runtime_seconds <= 0:
        return None
    return started_at + timedelta(seconds=min(float(min_runtime_seconds), _CAP_SECONDS))


def protected_until(
    *, started_at: datetime, min_runtime_seconds: int, recorded: datetime | None
) -> datetime | None:
    """When the run may be preempted for other work: what the engine recorded when it
    started the run, or — for a run it did not record — the start plus the capped minimum
    runtime. ``None`` for the free lane (preemptible at any time)."""
    if min_runtime_seconds <= 0:
        return None
    if recorded is not None:
        return recorded
    return drain_due_at(started_at=started_at, min_runtime_seconds=min_runtime_seconds)
