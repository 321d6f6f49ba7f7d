"""The small world the preemption tests share: two teams, a start time, and runs to evict.

``halves``: alpha and beta at 50 % each; ``OVER``: the window's usage that ranks alpha
first; ``run`` records a running workload, ``debug`` makes a waiting debug job.
"""

from __future__ import annotations

from tests.engine.conftest import HOUR, MINUTE, budget, build_workload, leaf

T0 = 1000 * HOUR  # runs below start here
LATER = T0 + 3 * HOUR + 10 * MINUTE  # 3 h 10 min later: past a 2 h minimum, inside 8 h


def halves():
    """alpha and beta, 50 % each."""
    return budget("root", 100, leaf("alpha", 50), leaf("beta", 50))


# alpha has used nothing; beta has used a lot: alpha ranks first.
OVER = {"alpha": 0.0, "beta": 500_000.0}


def run(sched, wid, project, placement, *, start=T0, min_runtime=2 * HOUR, resumable=True):
    """Record ``wid`` of ``project`` as running on ``placement`` (node -> GPUs) since ``start``."""
    gpus = sum(placement.values())
    w = build_workload(
        wid, project, gpus, min_runtime=min_runtime, nodes=len(placement), resumable=resumable
    )
    sched.add_running(w, placement, start)
    return w


def debug(wid, project, gpus=1, submit=T0):
    """A debug job waiting since ``submit`` (by default since T0: at LATER it has waited
    longer than any eviction here would lose per GPU, so the break-even patience is over)."""
    return build_workload(wid, project, gpus, submit=submit, min_runtime=15 * MINUTE)
