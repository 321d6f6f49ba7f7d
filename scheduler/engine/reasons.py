"""Plain-words phrases for pending reasons, starts and preemptions.

Every decision carries a reason a person can read; these helpers keep the wording in one
place so the live UI and the simulator say the same things.
"""

from __future__ import annotations


def gpus(n: int) -> str:
    """'1 GPU' / '8 GPUs'."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def duration(seconds: float) -> str:
    """A short human duration: '45 s', '14 min', '2.5 h'."""
    if seconds < 90:
        return f"{max(0, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def gpu_hours(gpu_seconds: float) -> str:
    """GPU-seconds as GPU-hours with one decimal ('3.2 GPU-h')."""
    return f"{gpu_seconds / 3600:.1f} GPU-h"


def waiting_for(gpu_count: int, nodes: int, largest_free: int, whole_free: int) -> str:
    """What a blocked workload waits for, and what the cluster offers now."""
    if nodes > 1:
        free = "1 whole node" if whole_free == 1 else f"{whole_free} whole nodes"
        return f"waiting for {gpus(gpu_count)} on {nodes} whole nodes ({free} free)"
    return (
        f"waiting for {gpus(gpu_count)} on one node "
        f"(largest free block: {gpus(largest_free) if largest_free else 'none'})"
    )


def next_victim(seconds: float | None) -> str:
    """When the next workload this one could preempt becomes preemptible."""
    if seconds is None:
        return "no running work it may preempt"
    return f"next eligible victim reaches its minimum runtime in {duration(seconds)}"


def patience(seconds: float) -> str:
    """A workload that found work to evict waits first, while waiting costs less than the
    eviction would lose (break-even patience)."""
    return (
        f"may preempt in {duration(seconds)} if no GPUs free first (it waits while waiting "
        "costs less than the eviction would lose)"
    )
