"""The memo of a workload's last failed search, as the walk reads it on the next try.

While the memo holds (``memo_holds``), nothing a search could use has changed for the
workload and the try costs a few comparisons; when only some teams' room to be reclaimed
from grew (``grown_teams``), the new search looks at those teams' work and the nodes that
changed. Each function takes the ``Walk`` of the cycle (``walk.py``), as ``walk_victims``
and ``walk_reserve`` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.engine.records import Job

if TYPE_CHECKING:
    from scheduler.engine.walk import Walk


def memo_holds(walk: Walk, job: Job, preempts: bool, sig: object) -> bool:
    """Does the memo of ``job``'s last failed search still hold (same log position or
    later, a signature that still blocks, ``preemption_recheck`` not passed)?"""
    recheck = walk.params.preemption_recheck
    memo_ok = (
        job.fail_pos >= 0
        and (walk.view.still_blocked(job.fail_sig, sig) if preempts else job.fail_sig == sig)
        and walk.now - job.fail_time < recheck
    )
    if memo_ok and preempts:
        # When the memo runs out, a search may find what the signature could not show
        # (and patience is weighed again): the scheduler must not sleep through that.
        walk.s._set_timer(job.fail_time + recheck, job)
    return memo_ok


def grown_teams(walk: Walk, job: Job, preempts: bool, sig: object) -> list[str] | None:
    """The teams whose room to be reclaimed from grew since ``job``'s memo was made, when
    that alone broke the memo (``PolicyView.grown_since``); else None."""
    # The new search is a full one in all but where it looks (those teams' work, and the
    # nodes that changed), so it is booked as a full one.
    if (
        preempts
        and job.nodes == 1
        and job.fail_pos >= 0
        and walk.s.incremental
        and walk.now - job.fail_time < walk.params.preemption_recheck
    ):
        return walk.view.grown_since(job.fail_sig, sig)
    return None
