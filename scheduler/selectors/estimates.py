"""Estimated start of pending workloads: the engine run forward in virtual time from now.

The forward run is ``scheduler.simulator.forward.forward_starts``, the same code that measures
the estimate's error on a trace (``manage.py estimate_error``).

The estimate rebuilds the live engine exactly as a scheduling cycle does (the cycle's own
``cycle_state_read`` and ``cycle_scheduler_build`` in ``scheduler/services/cycle_state.py``, so nodes,
running runs, pending workloads, the budget tree and the usage window are read one way
only), then replays time forward on that copy — nothing is written. Assumptions, said
plainly on the page as the caveat:

- a running workload ends at its start + its declared duration (the remaining part for a
  resumable workload that ran before); one without a declared duration runs past the
  horizon (it never frees its GPUs inside the estimate);
- a pending workload, once started in the estimate, runs its declared duration (or past
  the horizon when it has none);
- nothing new arrives, and the fair-share order stays as it is now (the usage window is
  not advanced);
- the live policy (``SCHEDULER_POLICY``) decides, with preemption, minimum runtimes and
  gang reservations exactly as in production.

The loop is bounded: at most ``ESTIMATE_HORIZON_SECONDS`` of virtual time and
``ESTIMATE_MAX_STEPS`` engine cycles. A workload that would not start inside the horizon
has no estimate ("not within N days"). Results are cached per cluster for
``ESTIMATE_CACHE_SECONDS`` and keyed by the latest scheduling cycle, so a new cycle
invalidates them at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from governance.models import Cluster
from scheduler.choices import WorkloadState
from scheduler.models import Run, SchedulingCycle, Workload

# Why private names: the cycle module is the one place the live state is read; importing its
# readers (instead of copying them) keeps the estimate and production on the same inputs.
from scheduler.services.cycle_state import cycle_scheduler_build, cycle_state_read
from scheduler.simulator.forward import forward_starts

logger = logging.getLogger(__name__)

ESTIMATE_HORIZON_SECONDS = 7 * 86400.0
ESTIMATE_MAX_STEPS = 3000
ESTIMATE_CACHE_SECONDS = 30
# A long estimated wait is shown as a range: measured on Philly at 256 and 512 GPUs
# (``manage.py estimate_error``, docs/dashboards.md), the real wait of a job estimated to
# wait 30 min or more fell between 0.93 and 3.31 times the estimate for 80 % of jobs (p10
# to p90 of both sizes, the replay cycling as the tables do or at the engine's timers); the
# ratios are those, rounded outwards. Measure again whenever the policy changes: work that
# arrives later and outranks a job is what makes it late.
RANGE_FROM_SECONDS = 1800.0
RANGE_RATIOS = (0.9, 3.4)
CAVEAT = (
    "Estimate: assumes running work ends as declared and no higher-ranked work arrives; "
    "work without a declared duration is assumed to run past the horizon."
)


@dataclass
class ClusterEstimate:
    """Estimated starts of one cluster's pending workloads, as computed at ``computed_at``.

    ``starts`` maps workload id → estimated start (aware datetime); a pending workload
    missing from it would not start within ``horizon_seconds``. ``steps`` is the number of
    engine cycles the estimate ran; ``truncated`` is True when it stopped on the step bound.
    """

    cluster_id: int
    computed_at: datetime
    horizon_seconds: float
    starts: dict[int, datetime] = field(default_factory=dict)
    steps: int = 0
    truncated: bool = False
    unavailable: str = ""  # why there is no estimate at all (the engine refused the state)

    @property
    def horizon_end(self) -> datetime:
        """The last instant the estimate looked at."""
        return self.computed_at + timedelta(seconds=self.horizon_seconds)


def _remaining_seconds(cluster: Cluster, workload_ids: list[int], now: datetime) -> dict:
    """Declared work left per workload (seconds), for those that declared a duration.

    A resumable workload keeps what its finished runs did; an open run's elapsed time is
    subtracted by the caller (it knows the run's start).
    """
    declared = dict(
        Workload.objects.filter(
            id__in=workload_ids, declared_duration_seconds__isnull=False
        ).values_list("id", "declared_duration_seconds")
    )
    resumable = set(
        Workload.objects.filter(id__in=list(declared), resumable=True).values_list("id", flat=True)
    )
    done: dict[int, float] = {}
    for workload_id, started_at, ended_at in Run.objects.filter(
        workload_id__in=resumable, ended_at__isnull=False
    ).values_list("workload_id", "started_at", "ended_at"):
        done[workload_id] = done.get(workload_id, 0.0) + (ended_at - started_at).total_seconds()
    return {wid: max(0.0, float(secs) - done.get(wid, 0.0)) for wid, secs in declared.items()}


def cluster_estimate_compute(
    *,
    cluster: Cluster,
    now: datetime | None = None,
    horizon_seconds: float = ESTIMATE_HORIZON_SECONDS,
    max_steps: int = ESTIMATE_MAX_STEPS,
) -> ClusterEstimate:
    """Run the live engine forward from ``now`` and return when each pending workload starts.

    Uncached; reads the database and writes nothing. See the module docstring for the
    assumptions. Deterministic: the same state gives the same estimate.
    """
    now = now or timezone.now()
    policy = settings.SCHEDULER_POLICY
    state = cycle_state_read(cluster)
    sched, usage, _running = cycle_scheduler_build(cluster, state, now, policy)
    t0 = now.timestamp()
    estimate = ClusterEstimate(
        cluster_id=cluster.id, computed_at=now, horizon_seconds=horizon_seconds
    )
    targets = set(sched.pending_ids())
    if not targets:
        return estimate
    remaining = {
        str(wid): left
        for wid, left in _remaining_seconds(
            cluster, [int(w) for w in targets | set(sched.running)], now
        ).items()
    }
    for workload_id, running in sched.running.items():
        # A running workload's open run has already done some of its work.
        if workload_id in remaining:
            remaining[workload_id] = max(0.0, remaining[workload_id] - (t0 - running.start_time))
    found = forward_starts(
        sched,
        usage,
        remaining,
        now=t0,
        targets=targets,
        horizon_seconds=horizon_seconds,
        max_steps=max_steps,
    )
    estimate.steps, estimate.truncated = found.steps, found.truncated
    estimate.starts = {
        int(wid): datetime.fromtimestamp(t, UTC) for wid, t in sorted(found.starts.items())
    }
    return estimate


def estimate_range(*, now: datetime, estimate: datetime | None) -> tuple[datetime, datetime] | None:
    """The span to show instead of a point for an estimated wait of ``RANGE_FROM_SECONDS`` or
    more: the wait times the measured ``RANGE_RATIOS`` (None for a shorter or no wait)."""
    if estimate is None:
        return None
    wait = (estimate - now).total_seconds()
    if wait < RANGE_FROM_SECONDS:
        return None
    low, high = RANGE_RATIOS
    return now + timedelta(seconds=wait * low), now + timedelta(seconds=wait * high)


def cluster_estimate(*, cluster: Cluster, now: datetime | None = None) -> ClusterEstimate:
    """The cached estimate of ``cluster`` (recomputed after a new cycle or 30 s).

    Never raises: when the engine refuses the live state (e.g. a cluster without nodes),
    the estimate is empty and ``unavailable`` says why (the error is logged).
    """
    latest = (
        SchedulingCycle.objects.filter(cluster=cluster)
        .order_by("-started_at", "-id")
        .values_list("id", flat=True)
        .first()
    )
    key = f"scheduler:estimate:{cluster.id}:{latest}"
    found = cache.get(key)
    if found is not None:
        return found
    try:
        estimate = cluster_estimate_compute(cluster=cluster, now=now)
    except Exception as exc:  # the queue page must stay up whatever the engine says
        logger.exception("estimate for cluster %s failed", cluster.id)
        estimate = ClusterEstimate(
            cluster_id=cluster.id,
            computed_at=now or timezone.now(),
            horizon_seconds=0.0,
            unavailable=f"No estimate: {exc}",
        )
    cache.set(key, estimate, ESTIMATE_CACHE_SECONDS)
    return estimate


def workload_estimates(*, workloads) -> dict[int, datetime | None]:
    """Estimated start per pending workload among ``workloads`` (None: not within the horizon).

    One estimate per cluster involved (cached). Other states, and clusters whose estimate is
    unavailable, are left out.
    """
    pending = [w for w in workloads if w.state == WorkloadState.PENDING]
    out: dict[int, datetime | None] = {}
    by_cluster: dict[int, Cluster] = {w.cluster_id: w.cluster for w in pending}
    estimates = {cid: cluster_estimate(cluster=c) for cid, c in by_cluster.items()}
    for w in pending:
        if not estimates[w.cluster_id].unavailable:
            out[w.pk] = estimates[w.cluster_id].starts.get(w.pk)
    return out
