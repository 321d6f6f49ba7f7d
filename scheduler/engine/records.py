"""The engine's internal record of one workload (pending or running) and the lost-work rule."""

from __future__ import annotations

from scheduler.engine.model import Workload
from scheduler.engine.names import interned


class Job:
    """A workload as the engine tracks it: normalised shape, order key, and run state.

    ``nodes`` is normalised: a single-node request larger than any node becomes a gang of
    the fewest whole nodes that hold it. ``mr`` is the minimum runtime capped by the policy
    parameters. ``lane`` is 0 for charged work and 1 for the free lane when the policy
    treats the free lane separately. ``key`` orders the job inside its group.
    """

    __slots__ = (
        "charged",
        "clear_count",
        "clear_held",
        "clear_pos",
        "clear_room",
        "evictable",
        "fail_held",
        "fail_pos",
        "fail_sig",
        "fail_time",
        "gpus",
        "group",
        "head_since",
        "id",
        "idle",
        "key",
        "lane",
        "loan_for",
        "lost",
        "lost_walk",
        "mr",
        "nodes",
        "patient_until",
        "placement",
        "preempted",
        "project",
        "protected_until",
        "queued_at",
        "running",
        "seq",
        "shape",
        "start",
        "swapped_for",
        "w",
    )

    def __init__(self, w: Workload, nodes: int, mr: float) -> None:
        self.w = w
        self.id = w.id
        # Interned: every per-project table of a cycle is keyed by it, and a driver's rows
        # each carry their own copy of the name (lookups then match by identity).
        self.project = interned(w.project)
        self.gpus = w.gpus
        self.nodes = nodes
        self.mr = mr
        self.charged = mr > 0
        self.shape: tuple[int, ...] = (w.gpus, nodes)  # (gpus, nodes): see state._Shape
        self.key: tuple = ()
        self.group = ""
        self.lane = 0
        self.seq = 0
        self.running = False
        self.start = 0.0
        self.placement: dict[str, int] = {}
        self.evictable = False
        self.protected_until = 0.0
        # The pending workload whose held node this run borrows (see ``holds``), or None.
        self.loan_for: str | None = None
        # The driver judged this run idle (``Scheduler.set_idle``): victims are chosen idle
        # first. A new run starts busy.
        self.idle = False
        self.head_since: float | None = w.blocked_since
        # when it last became pending (a requeue resets it)
        self.queued_at = w.submit_time if w.queued_at is None else w.queued_at
        # No preemption search before this (break-even patience; 0: none pending).
        self.patient_until = w.patient_until or 0.0
        # Evictions suffered so far (the churn budget lengthens its protection).
        self.preempted = w.preemptions
        # The same project's workload that evicted this one's last run, while this one waits
        # (see ``Workload.swapped_for``); cleared when this one starts again.
        self.swapped_for: str | None = w.swapped_for
        # Memo of the last failed preemption search (see walk_victims.preempt).
        self.fail_pos = -1
        self.fail_sig: object = None
        self.fail_time = 0.0
        # The nodes held for others when that search failed (see Walk._try).
        self.fail_held: tuple[int, ...] = ()
        # Memo of the last failed attempt to clear whole nodes for this gang: the opportunity
        # log position then, how many nodes were admissible, and the other teams' room to be
        # reclaimed from (see walk_reserve.clear_for_gang). A single-node workload's failed
        # one-step reclaim keeps the same memo and the nodes held for others then
        # (walk_reserve.reclaim_one_step).
        self.clear_pos = -1
        self.clear_count = 0
        self.clear_room: dict[str, int] = {}
        self.clear_held: tuple[int, ...] = ()
        # What this workload loses if evicted, as the walk numbered ``lost_walk`` computed
        # it (``Walk._lost_of``): a field, not a dict per walk, since it is asked for every
        # victim a search looks at.
        self.lost_walk = -1
        self.lost = 0.0

    @property
    def per_node(self) -> int:
        """GPUs needed on the busiest node of the placement."""
        return -(-self.gpus // self.nodes)


def lost_gpu_seconds(
    job: Job, now: float, checkpoint_interval: float, restart_overhead: float
) -> float:
    """GPU-seconds of work thrown away if ``job`` is preempted at ``now``.

    Resumable work loses what it did since its last checkpoint plus the restart overhead;
    non-resumable work loses its whole current run.
    """
    ran = max(0.0, now - job.start)
    if job.w.resumable and checkpoint_interval > 0:
        return job.gpus * (ran % checkpoint_interval + restart_overhead)
    return job.gpus * ran


def protection_seconds(job: Job, max_min_runtime: float) -> float:
    """How long a run of ``job`` is protected from preemption: the churn budget.

    A workload's first run is protected for its minimum runtime; each preemption it has
    suffered doubles that for its next run, up to the larger of its minimum runtime and the
    cap on minimum runtimes (8 h by default). A workload can then be evicted only a few
    times before it is protected as long as any workload may ask to be, so the work one
    workload can lose to churn is bounded. The free lane (0) stays preemptible at any time.
    """
    if job.mr <= 0 or job.preempted <= 0:
        return job.mr
    return min(job.mr * 2 ** min(job.preempted, 16), max(job.mr, max_min_runtime))
