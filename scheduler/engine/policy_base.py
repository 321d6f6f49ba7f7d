"""What every policy is: the per-cycle inputs, the view's defaults, and the named policy.

A policy (``policies.py`` names them) returns a per-cycle *view* built from a snapshot of the
cluster (``CycleInputs``); the defaults here describe a policy that never preempts and
orders one queue. Each policy overrides only what differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.engine.fairtree import BudgetTree
from scheduler.engine.model import PolicyParams, Workload
from scheduler.engine.records import Job


class CycleInputs:
    """What a policy may look at when a cycle begins.

    ``projects`` are the projects with pending or running work, sorted. ``allocated`` is
    GPUs held per project (all lanes); ``charged_allocated`` counts charged work only, and
    ``debug_allocated`` its debug-class part (``PolicyParams.debug_min_runtime``).
    ``evictable`` maps a project to GPUs of its charged running work past minimum runtime.
    ``usage_order``: the policy's ``usage_order`` for these inputs when already known.
    ``swapped``: per project, GPUs of its pending work that its own running work swapped
    out (``Workload.swapped_for``); they count towards its claim to reclaim.
    """

    # A plain class, not a dataclass: built every cycle, and the native build compiles an
    # __init__ written out (a dataclass's is generated as plain Python at import).
    def __init__(
        self,
        *,
        tree: BudgetTree,
        usage: Mapping[str, float],
        projects: list[str],
        allocated: dict[str, int],
        charged_allocated: dict[str, int],
        evictable: dict[str, int],
        healthy_gpus: int,
        now: float,
        debug_allocated: dict[str, int] | None = None,
        params: PolicyParams | None = None,
        usage_order: list[str] | None = None,
        swapped: dict[str, int] | None = None,
    ) -> None:
        self.tree = tree
        self.usage = usage
        self.projects = projects
        self.allocated = allocated
        self.charged_allocated = charged_allocated
        self.evictable = evictable
        self.healthy_gpus = healthy_gpus
        self.now = now
        self.debug_allocated: dict[str, int] = {} if debug_allocated is None else debug_allocated
        self.params: PolicyParams = PolicyParams() if params is None else params
        # ``Policy.usage_order`` for this usage, when the scheduler already asked it
        self.usage_order = usage_order
        self.swapped: dict[str, int] = {} if swapped is None else swapped


class PolicyView:
    """One cycle of a policy. The defaults describe a policy that never preempts."""

    #: Whether ``signature(job)`` changes at once (within a cycle too) whenever a running
    #: workload may become a victim of ``job`` without its node changing. The walk then
    #: leaves out of a failed search's retry the nodes logged only because a workload that
    #: is no victim of the job passed its minimum runtime (``walk_victims.fresh_nodes``).
    victims_follow_signature = False

    #: Whether every answer of the view follows the walk's starts as they happen (none
    #: rests on the state the cycle began with). A head that failed after the walk's last
    #: start was then judged on the state the walk leaves, so a walk that only started work,
    #: each failure after its last start, leaves nothing for the next one to redo
    #: (``state_quiet.starts_settled``).
    follows_starts = False

    def __init__(self) -> None:
        #: groups in the order their pending work is offered capacity
        self.groups: list[str] = [""]
        #: groups offered capacity before everyone else, up to their guarantee
        self.guaranteed: list[str] = []
        #: the part of the order that usage alone moves (``Policy.usage_order``)
        self.usage_order: list[str] | None = None

    def within_guarantee(self, job: Job) -> bool:
        """Would ``job`` keep its group within what the policy guarantees it?"""
        return False

    def is_guaranteed(self, group: str) -> bool:
        """Does ``group`` hold less than the policy guarantees it, now?"""
        return False

    def guarantee_order(self, groups: Sequence[str]) -> list[str]:
        """The ``groups`` holding less than their guarantee now, in the order they are
        offered free GPUs before everyone else (by default, as given)."""
        return [g for g in groups if self.is_guaranteed(g)]

    def project_phrase(self, project: str) -> str:
        """Where the project stands, in plain words (the first part of a pending reason)."""
        return f"project {project}"

    def cap_block(self, job: Job) -> str | None:
        """Why the policy refuses ``job`` now regardless of free GPUs, or None."""
        return None

    def may_reclaim(self, job: Job) -> bool:
        """May ``job`` preempt other projects' work at all (cheap gate before any search)?"""
        return False

    def group_may_reclaim(self, group: str) -> bool:
        """Could any workload of ``group`` pass ``may_reclaim``? (May say yes too often.)"""
        return False

    def may_preempt_project(self, job: Job, project: str, victim_gpus: int) -> bool:
        """May ``job`` preempt ``victim_gpus`` of another ``project``'s work past its minimum?

        Only asked when ``may_reclaim(job)`` is true.
        """
        return False

    def reclaim_limit(self, job: Job, project: str) -> int | None:
        """The most GPUs one eviction choice of ``job`` may take from another ``project``'s
        charged work, all its victims together; None when only each victim alone is judged
        (``may_preempt_project``)."""
        return None

    def signature(self, job: Job) -> object:
        """What ``job``'s victim eligibility depends on, beyond the nodes themselves.

        A failed preemption search is not repeated while this value stays the same and no
        node changed (see ``Scheduler``); it must change whenever the policy could start
        allowing ``job`` to preempt someone it could not before.
        """
        return None

    def still_blocked(self, old: object, new: object) -> bool:
        """True if a job that failed under signature ``old`` cannot have gained victims now.

        The default asks for equality; a policy may accept any narrower situation.
        """
        return old == new

    def grown_since(self, old: object, new: object) -> list[str] | None:
        """When ``still_blocked(old, new)`` is false only because some teams' room to be
        reclaimed from grew, those teams (a failed search then need look again only at
        their work and at the nodes that changed); None when anything else differs."""
        return None

    def own_victim_ok(self, job: Job, victim: Job) -> bool:
        """May ``job`` preempt ``victim`` of its own project (victim past minimum runtime)?"""
        return False

    def victims_possible(self, group: str) -> bool:
        """Could any group from ``group`` on in the order still find a victim?"""
        return False

    def may_lose_to_reclaim(self, project: str, gpus: int, claimants: Sequence[str]) -> bool:
        """Could another team's workload evict ``gpus`` GPUs of ``project``'s work past its
        minimum runtime, as things stand? ``claimants``: the groups in ``guaranteed`` with
        pending charged work. (May say yes too often, never no wrongly.)"""
        return True

    def may_clear_for_gang(self, job: Job) -> bool:
        """May the gang ``job``, past its reservation bound, clear whole nodes by evicting
        (see ``walk_reserve.clear_for_gang``)?"""
        return False

    def gang_victims_ok(self, job: Job, gpus_by_project: Mapping[str, int]) -> bool:
        """May that gang evict other projects' charged work past its minimum runtime
        (``gpus_by_project``: GPUs of each)?"""
        return False

    def reclaimable(self) -> dict[str, int]:
        """GPUs each team could lose to a reclaim now (what it runs above its guarantee).

        ``gang_victims_ok`` must only say yes more often when these grow: a gang that found
        too few nodes is not searched again until a node changed or some team has more.
        """
        return {}

    def why(self, job: Job, victim: Job) -> str:
        """Why ``job`` is allowed to preempt ``victim`` (for the preemption's reason)."""
        return "preempted"

    def swapped_out(self, job: Job) -> None:
        """``job``, just evicted (``evicted``), was evicted by work of its own project."""

    def swapped_gpus(self, project: str) -> int:
        """GPUs of ``project``'s own work it swapped out that still count as its own when it
        claims GPUs from other teams (0 for a policy that does not count them)."""
        return 0

    def started(self, job: Job) -> None:
        """``job`` starts in this cycle (told before its swap, ``Job.swapped_for``, ends)."""

    def evicted(self, job: Job) -> None:
        """``job`` was evicted in this cycle."""


class Policy:
    """A named policy: grouping, order inside a group, and its per-cycle view."""

    name = ""
    #: whether a pending workload may evict running ones
    preempts = False
    #: whether minimum runtime 0 is a separate, always-preemptible lane served last
    free_lane = False
    #: whether a workload waits before evicting until the wait cost what the eviction loses
    patient = False
    #: whether each preemption doubles the protection of a workload's next run
    churn_budget = False
    #: whether, after the guarantee pass, debug-class work of every group goes first
    short_first = False
    #: whether held nodes lend their free GPUs to short work that yields to the holder
    lends_holds = False
    #: whether a blocked single-node workload past the hold bound may move one workload
    consolidates = False

    def group(self, w: Workload) -> str:
        """The queue a workload waits in (its project, unless the policy has one queue)."""
        return w.project

    def key(self, w: Workload, min_runtime: float) -> tuple:
        """Order inside a group: priority, then shorter minimum runtime, submit time, id."""
        return (-w.priority, min_runtime, w.submit_time, w.id)

    def begin(self, inputs: CycleInputs) -> PolicyView:
        """Build this cycle's view."""
        raise NotImplementedError

    def usage_order(
        self, tree: BudgetTree, usage: Mapping[str, float], projects: list[str]
    ) -> list[str] | None:
        """What of a cycle's group order the window's usage alone can change (None: usage
        orders nothing). The view of a cycle reports the same as ``PolicyView.usage_order``.

        Between cycles in which nothing was submitted, started, finished or changed, only
        time passes and usage grows; comparing this with the last view's tells the scheduler
        whether the order moved, without building a view.
        """
        return None

    def __repr__(self) -> str:
        return f"<Policy {self.name}>"
