"""Inputs and outputs of the scheduling engine: plain dataclasses, no behaviour beyond helpers.

Times are seconds as floats (epoch seconds in the live loop, trace seconds in the simulator).
GPU counts are ints. Shares are percents of the parent (0-100). See ``docs/engine-api.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal


class NodeState(StrEnum):
    """Health of a node as the operator or the node agent reports it.

    ``draining`` takes nothing new and evicts each workload once it passes its minimum runtime;
    the engine turns it into ``drained`` when the node is empty. ``down`` nodes count for nothing
    and their running workloads are requeued at the next cycle.
    """

    HEALTHY = "healthy"
    DRAINING = "draining"
    DRAINED = "drained"
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class Node:
    """A machine with ``gpus`` GPUs of the cluster's single GPU type."""

    name: str
    gpus: int
    state: NodeState = NodeState.HEALTHY


@dataclass(frozen=True, slots=True)
class Workload:
    """A request for ``gpus`` GPUs charged to ``project``.

    ``nodes > 1`` is a gang: it needs ``nodes`` whole free nodes, all or nothing, and its GPUs
    are split evenly over them. ``min_runtime`` (seconds, 0 to 8 h) protects a run from
    preemption until it has run that long; ``min_runtime == 0`` is the free lane (not charged,
    preemptible at any moment). ``priority`` orders the workload among its own project's
    workloads only (higher first). ``preemptions`` counts the times it was evicted before
    (by preemption, not drain): each one doubles the protection of its next run, up to the
    cap on minimum runtimes (the churn budget, ``records.protection_seconds``).

    A driver that rebuilds the engine (the live loop does after a restart or on any doubt,
    and for each workload that changed) passes back what the engine remembered of a
    pending workload: ``queued_at``, when it last became pending (a
    requeue; None: its submit time), from which break-even patience counts; and
    ``blocked_since``, when it first waited blocked at the head of its project's turn, as
    ``CycleResult.blocked_since`` reported it (a gang holds nodes once that is long enough);
    and ``patient_until``, the end of the break-even patience it was waiting out, as
    ``CycleResult.patient_until`` reported it (it searches for victims again only then).

    ``burst_rank``: for debug-class work, how many debug-class workloads the same submitter
    sent to the same project in the ``debug_min_runtime`` before this one (``bursts``); the
    driver computes it at submit. ``fairshare`` orders a project's work by it before submit
    time, so a lone debug job is not queued behind a colleague's sweep.

    ``swapped_for``: the id of the workload of the same project that evicted this one's last
    run (a swap: a debug job taking the place of its team's training run), as the
    driver remembers it (the live loop: the last run's ``preempted_by``). While that
    workload runs and this one waits, the team's claim to reclaim from other teams counts
    this one's GPUs as still held: a team cannot fall below its entitlement by its own
    choice and then take GPUs back from a team that reclaimed from it (``docs/design.md``,
    "Why this cannot ping-pong"). None: not swapped out, or the driver does not know.
    """

    id: str
    project: str
    gpus: int
    submit_time: float
    min_runtime: float = 0.0
    resumable: bool = True
    priority: int = 0
    nodes: int = 1
    preemptions: int = 0
    queued_at: float | None = None
    blocked_since: float | None = None
    patient_until: float | None = None
    burst_rank: int = 0
    swapped_for: str | None = None

    @property
    def is_gang(self) -> bool:
        """True when the workload needs several whole nodes."""
        return self.nodes > 1

    @property
    def free_lane(self) -> bool:
        """True for the uncharged, always-preemptible lane (minimum runtime 0)."""
        return self.min_runtime <= 0


@dataclass(slots=True)
class BudgetNode:
    """One node of the budget tree (organization -> program -> project).

    ``share`` is the percent of the parent's share; the root's share is 100. Leaves are project
    names. Projects that appear in no leaf are unbudgeted and rank after every budgeted one.
    """

    name: str
    share: float
    children: list[BudgetNode] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PolicyParams:
    """Tunables shared by every policy; the defaults and why: ``docs/design.md``.

    - ``window_seconds``: the sliding usage window the driver sums ``usage`` over (the engine
      only records it; the driver computes the sums).
    - ``gang_reserve_after``: a gang blocked at the head of its project's turn for this long
      reserves the whole nodes it needs.
    - ``checkpoint_interval`` / ``restart_overhead``: how much work a preempted resumable
      workload loses (time since its last checkpoint plus the restart cost).
    - ``max_min_runtime``: minimum runtimes above this are capped to it.
    - ``max_reserved_fraction``: at most this fraction of healthy nodes may be held by
      reservations at once, so reservations cannot idle the cluster.
    - ``max_preemptions_per_cycle``: evictions one cycle may order. Rebalancing after a big
      shift (a budget change, an idle team coming back) then happens over a few cycles
      instead of in one burst, which bounds both churn and the cost of a cycle.
    - ``preemption_recheck``: a preemption search that found nothing is not repeated for the
      same project and shape until something it depends on changed or this many seconds
      passed (bounds the cost of a cycle where nothing can change).
    - ``debug_min_runtime``: work protected for at most this long is debug-class (a person
      waiting at a prompt, not a training run).
    - ``debug_share``: debug-class work may evict its own project's longer runs only while
      the project's running debug-class GPUs stay within this fraction of its entitlement
      (at least the one workload). A person's debug job goes first inside the project, but a
      sweep of thousands of short jobs does not tear down the team's own training runs.
    """

    window_seconds: float = 7 * 86400.0
    gang_reserve_after: float = 1800.0
    checkpoint_interval: float = 1800.0
    restart_overhead: float = 300.0
    max_min_runtime: float = 8 * 3600.0
    max_reserved_fraction: float = 0.5
    max_preemptions_per_cycle: int = 32
    preemption_recheck: float = 300.0
    debug_min_runtime: float = 1800.0
    debug_share: float = 0.25


@dataclass(frozen=True, slots=True)
class RunningWorkload:
    """A workload the engine believes is running: where, since when (this run), and until
    when it is protected from preemption (start + its minimum runtime, lengthened by the
    churn budget; equal to ``start_time`` for the free lane). ``loan_for``: the pending
    workload whose held node this run borrows (it yields to that workload once past its
    protection), as ``Start.loan_for`` said; None for an ordinary run. ``idle``: the driver
    judged the run idle (its GPUs below 5 % busy for 30 minutes while past its minimum
    runtime: ``Scheduler.set_idle``); an idle run is taken before any busy one when the
    engine chooses victims among those it may preempt (``docs/design.md``, "Preemption")."""

    workload: Workload
    placement: dict[str, int]
    start_time: float
    protected_until: float = 0.0
    loan_for: str | None = None
    idle: bool = False


@dataclass(frozen=True, slots=True)
class IdleGpus:
    """Free GPUs on healthy nodes, by why they are idle (``Scheduler.idle_gpus``).

    ``held``: on nodes held for a blocked workload. ``gang_owned``: left over on nodes a gang
    owns whole. ``fragmented``: on other nodes, each with fewer free GPUs than any pending
    single-node workload asks for. ``unused``: on a node where some pending single-node
    workload would fit, left free by the policy. ``pending_gpus``: GPUs the pending
    workloads ask for.
    """

    held: int
    gang_owned: int
    fragmented: int
    unused: int
    pending_gpus: int


@dataclass(frozen=True, slots=True)
class Start:
    """Order: start ``workload_id`` with ``placement`` (node name -> GPUs on that node).

    ``loan_for``: the run borrows free GPUs of a node held for that pending workload and
    yields to it (a driver that rebuilds the engine passes it back to ``add_running``).
    """

    workload_id: str
    placement: dict[str, int]
    reason: str
    protected_until: float = 0.0
    loan_for: str | None = None


@dataclass(frozen=True, slots=True)
class Preemption:
    """Order: stop ``workload_id`` and requeue it (its submit time is kept).

    ``by`` is the preemptor's id for ``kind == "preempt"``; ``None`` for ``kind == "drain"``
    (an operator drain or a node that went down).
    """

    workload_id: str
    reason: str
    by: str | None
    kind: Literal["preempt", "drain"] = "preempt"


class CycleResult:
    """Everything one scheduling cycle decided, already applied to the scheduler's state.

    ``reasons``, ``order``, ``blocked_since``, ``patient_until`` and ``project_phrases`` are
    filled only when the cycle ran with ``explain=True``. ``blocked_since`` maps each pending
    workload that waits blocked at the head of its project's turn to when that wait began
    (see ``Workload.blocked_since``); ``patient_until`` maps each pending workload waiting out
    its break-even patience to when that patience ends (see ``Workload.patient_until``).
    ``project_phrases`` maps each project with pending work to the words every one of its
    reasons begins with (where it stands in the policy's order), followed in the reason by
    ``"; "``: a driver that stores reasons may keep that part once per project, since it
    changes for all of them at once.
    """

    # A plain class, not a dataclass: one is built every cycle, and the native build compiles
    # an __init__ written out (a dataclass's is generated as plain Python at import).
    def __init__(self) -> None:
        self.starts: list[Start] = []
        self.preemptions: list[Preemption] = []
        self.drained: list[str] = []
        self.reasons: dict[str, str] = {}
        self.order: list[str] = []
        self.blocked_since: dict[str, float] = {}
        self.patient_until: dict[str, float] = {}
        self.project_phrases: dict[str, str] = {}

    def __repr__(self) -> str:
        return (
            f"CycleResult(starts={self.starts!r}, preemptions={self.preemptions!r}, "
            f"drained={self.drained!r})"
        )
