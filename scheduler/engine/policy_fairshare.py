"""The fair-share policy: entitlement first, then Fair Tree over the sliding window.

Its view (``_FairShareView``) answers who may reclaim from whom, what a failed search's memo
depends on (``signature``) and how each eviction is explained; ``docs/design.md`` has the
rules in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.engine.fairtree import BudgetTree, Ranking
from scheduler.engine.model import Workload
from scheduler.engine.policy_base import CycleInputs, Policy, PolicyView
from scheduler.engine.records import Job

_LEVEL_WORDS = ("organization", "program", "group")


def later_victims(order: Sequence[str], evictable: Mapping[str, int]) -> dict[str, bool]:
    """Per project of ``order``: does some project at its rank or after it hold evictable
    work (own-project victims included)? A walk at that rank may then still find someone
    to preempt (``_FairShareView.victims_possible``)."""
    later: dict[str, bool] = {}
    found = False
    for i in range(len(order) - 1, -1, -1):
        found = found or evictable.get(order[i], 0) > 0
        later[order[i]] = found
    return later


class _RoomGrowth:
    """How often any team's room above its entitlement grew over one scheduler's life, which
    team's room each growth was (``teams[i]``: growth ``i + 1``), and the rooms its last
    cycle ended with. A failed search's memo holds while the count has not moved (see
    ``_FairShareView.signature``): a room that grew may hold a new victim, but only among
    that team's work (``_FairShareView.grown_since``)."""

    def __init__(self) -> None:
        self.count = 0
        self.teams: list[str] = []
        self.rooms: dict[str, int] = {}

    def grew(self, team: str) -> None:
        """``team``'s room above its entitlement grew."""
        self.count += 1
        self.teams.append(team)


class _FairShareView(PolicyView):
    # The signature counts every growth of a team's room as it happens, and reads the
    # job's own debug GPUs and its right to reclaim as they are (``signature``).
    victims_follow_signature = True
    # Allocations, rooms, debug GPUs and swapped-out GPUs are all kept as work starts.
    follows_starts = True

    def __init__(self, inputs: CycleInputs, order: list[str], growth: _RoomGrowth) -> None:
        super().__init__()
        self.inputs = inputs
        self.tree = inputs.tree
        # The walk needs only the order; the rest of the ranking (usage per node, sibling
        # ranks) is for reasons, built on first use (``ranking``).
        self._ranking: Ranking | None = None
        self.groups = order
        self.usage_order = order
        self.alloc = dict(inputs.charged_allocated)
        self.debug_alloc = dict(inputs.debug_allocated)
        # GPUs of each team's own work it swapped out, still counted as its own when it
        # claims GPUs from other teams (``_claimed``).
        self._swapped = dict(inputs.swapped)
        # Whole GPUs that add up to the cluster (largest remainder, see the tree).
        self.entitled = inputs.tree.entitled_gpus(inputs.healthy_gpus)
        # Entitlement first: teams below theirs get free GPUs up to it, before the window
        # orders what is left above entitlement (``guarantee_order``). Waiting for a
        # reclaim (a victim's minimum runtime) while free GPUs go to teams already above
        # their entitlement is what cost the hourly figure and caused the reclaims.
        self.guaranteed = self.guarantee_order(order)
        # GPUs each team runs above its entitlement (what a reclaim may take), kept as the
        # cycle starts and evicts work: asked for every victim a search looks at. The teams
        # in it are the borrowers.
        entitled = self.entitled
        rooms: dict[str, int] = {}
        for p, gpus in self.alloc.items():
            room = gpus - entitled.get(p, 0)
            if room > 0:
                rooms[p] = room
        self._rooms = rooms
        # Rooms that grew since the last cycle ended (finishes only shrink them; a change of
        # entitlements or budgets may grow them) count as growth, as a start within it does.
        previous = growth.rooms
        for p, room in self._rooms.items():
            if room > previous.get(p, 0):
                growth.grew(p)
        growth.rooms = self._rooms
        self._growth = growth
        self.borrowers_set = frozenset(self._rooms)
        self._later_victims = later_victims(order, inputs.evictable)

    @property
    def ranking(self) -> Ranking:
        """The whole Fair Tree ranking of this cycle (its order is ``groups``)."""
        if self._ranking is None:
            self._ranking = self.tree.rank(self.inputs.usage, self.inputs.projects)
        return self._ranking

    def project_phrase(self, project: str) -> str:
        tree, ranking = self.tree, self.ranking
        if not tree.is_budgeted(project):
            return "project has no budget share (runs after every budgeted project)"
        rank = self._rank_phrase(tree.leaf_of[project])
        # The window only, in its own words: it once read "over budget", which a project
        # below its entitlement (served before the ranking, as the fair-share page says)
        # could read as the rule that held it back. What the project holds now is left out
        # on purpose: it changes with every start and end, and each change would rewrite
        # the reason of every pending workload of the project (the queue position beside
        # the reason already says where it stands).
        share = tree.effective_share[project]
        used = ranking.project_usage.get(project, 0.0)
        total = ranking.total_usage
        above = "more than" if total > 0 and used / total > share else "no more than"
        return f"project used {above} its share over the window ({rank})"

    def _rank_phrase(self, leaf: int) -> str:
        """The leaf's rank among its siblings, then each ancestor's among its own, up to the
        tree's top ("rank 4 of 4 in program vision; program vision ranks 1 of 3 in
        organization acme").

        A project's place in the queue follows its ancestors' ranks first (every project of
        a program ranked first comes before any of the next): its own rank alone could stand
        beside place 1 as "rank 4 of 4" with nothing to say why. Above the project's own
        level, a level with one child ranks nothing and is left out."""
        nodes, sibling_rank = self.tree.nodes, self.ranking.sibling_rank
        parts: list[str] = []
        node = nodes[leaf]
        while node.parent >= 0:
            parent = nodes[node.parent]
            siblings = len(parent.children)
            word = _LEVEL_WORDS[min(parent.depth, len(_LEVEL_WORDS) - 1)]
            where = f"{siblings} in {word} {parent.name}"
            if not parts:
                parts.append(f"rank {sibling_rank[node.index] + 1} of {where}")
            elif siblings > 1:
                own = _LEVEL_WORDS[min(node.depth, len(_LEVEL_WORDS) - 1)]
                parts.append(f"{own} {node.name} ranks {sibling_rank[node.index] + 1} of {where}")
            node = parent
        return "; ".join(parts)

    def is_guaranteed(self, group: str) -> bool:
        return self.alloc.get(group, 0) < self.entitled.get(group, 0)

    def guarantee_order(self, groups: Sequence[str]) -> list[str]:
        # The team holding the smallest part of its entitlement goes first; the window
        # order given breaks ties. The guarantee is about what a team holds now: a team
        # whose last week was busy above its share is owed its entitlement this hour all
        # the same. In window order, a small team that had burst the week before came after
        # every other team below its entitlement, however little of its own it held, and
        # its hours went unserved.
        # One pass, no key function: it runs for every view and several times a walk. The
        # position breaks ties as a stable sort by the part held alone would.
        alloc, entitled = self.alloc, self.entitled
        below: list[tuple[float, int, str]] = []
        for i, group in enumerate(groups):
            if self.is_guaranteed(group):
                below.append((alloc.get(group, 0) / entitled[group], i, group))
        below.sort()
        return [group for _, _, group in below]

    def within_guarantee(self, job: Job) -> bool:
        # Any charged workload of a team below its entitlement gets free GPUs first, even one
        # that takes the team past it: one workload is the smallest step the team can take
        # towards what it is owed. Evicting for it still needs ``may_reclaim``.
        return job.charged and self.is_guaranteed(job.project)

    def _claimed(self, project: str) -> int:
        """GPUs ``project`` holds as far as its claim on other teams' GPUs goes: what it runs
        plus what it swapped out of its own (``swapped_gpus``)."""
        held = self.alloc.get(project, 0)
        return held + self._swapped.get(project, 0) if self._swapped else held

    def _below_claim(self, project: str) -> bool:
        """Does ``project`` hold less than its entitlement, as its claim counts it?"""
        return self._claimed(project) < self.entitled.get(project, 0)

    def swapped_gpus(self, project: str) -> int:
        return self._swapped.get(project, 0)

    def swapped_out(self, job: Job) -> None:
        # A team that evicts its own run for better-class work (a debug job) chose to hold
        # less: that must not give it a claim on other teams' GPUs, or it could take back
        # what a team below its entitlement had just reclaimed from it (ping-pong).
        self._swapped[job.project] = self._swapped.get(job.project, 0) + job.gpus

    def may_reclaim(self, job: Job) -> bool:
        # Entitlement is a guarantee: a team that stays within its entitlement after this
        # start takes GPUs from teams above theirs, whatever the window rank. Catching up on
        # older usage beyond that goes through the order in which free GPUs are handed out,
        # not through evictions: evicting by window rank made the reference implementation
        # churn. Work the team swapped out of its own counts as held (``_claimed``).
        return self._claimed(job.project) + job.gpus <= self.entitled.get(job.project, 0)

    def group_may_reclaim(self, group: str) -> bool:
        return self._below_claim(group) and bool(self.borrowers_set)

    def _room(self, project: str) -> int:
        """GPUs ``project`` runs above its entitlement: what a reclaim may take from it."""
        return self._rooms.get(project, 0)

    def may_preempt_project(self, job: Job, project: str, victim_gpus: int) -> bool:
        # The victim's team must still hold at least its entitlement after the eviction:
        # only what a team runs above its entitlement is reclaimed, never what it is owed
        # (so a one-GPU shortfall never evicts a whole node of a team that barely borrows).
        # No ping-pong: the preemptor's team ends within its entitlement, so it is never the
        # victim of a reclaim (victims' teams run above theirs), and the victim's team ends
        # at or above its own, so the reclaim gives it no claim to reclaim with: evictions
        # between two teams go one way. Nothing is stolen back through third teams either,
        # since no reclaim takes any team below its entitlement, and a team that swaps its
        # own work out gains no claim by it (``swapped_out``).
        if project == job.project:
            return False
        room = self._room(project)
        return room > 0 and victim_gpus <= room

    def reclaim_limit(self, job: Job, project: str) -> int | None:
        # The same rule for a set: several victims of one team, each within its room, must
        # not together take the team below its entitlement.
        return None if project == job.project else self._room(project)

    def own_victim_ok(self, job: Job, victim: Job) -> bool:
        # Only a strictly better class (higher priority, or same priority and a shorter
        # minimum runtime: a debug job) evicts its own project's work; swapping two runs of
        # the same class would only lose work. A shorter minimum alone (same priority) is a
        # debug job's right, within the project's debug allowance.
        if job.w.priority != victim.w.priority:
            return job.w.priority > victim.w.priority
        if job.mr >= victim.mr:
            return False
        params = self.inputs.params
        if job.mr > params.debug_min_runtime:
            return True
        allowance = max(job.gpus, params.debug_share * self.entitled.get(job.project, 0))
        return self.debug_alloc.get(job.project, 0) + job.gpus <= allowance

    def victims_possible(self, group: str) -> bool:
        return self._later_victims.get(group, False)

    def may_lose_to_reclaim(self, project: str, gpus: int, claimants: Sequence[str]) -> bool:
        # Only a team below its entitlement reclaims (``may_reclaim``, and a held gang's or
        # a big workload's clearing), and every reclaim keeps the victim's team at or above
        # its own (``may_preempt_project``).
        return bool(claimants) and gpus <= self._room(project)

    def may_clear_for_gang(self, job: Job) -> bool:
        # The guarantee serves a held gang of a team below its entitlement, even when the
        # gang alone takes the team above it: one gang is the smallest step it can take.
        # Work the team swapped out of its own counts as held, as for any reclaim.
        return self._below_claim(job.project)

    def gang_victims_ok(self, job: Job, gpus_by_project: Mapping[str, int]) -> bool:
        # As for any reclaim: every team evicted from the cleared nodes keeps at least its
        # entitlement, so none of them gains a claim to take the nodes back.
        return all(
            project == job.project or self.may_preempt_project(job, project, gpus)
            for project, gpus in gpus_by_project.items()
        )

    def reclaimable(self) -> dict[str, int]:
        return dict(self._rooms)

    def why(self, job: Job, victim: Job) -> str:
        if not victim.charged:
            return "free-lane work yields to charged work"
        if victim.project == job.project:
            return f"a lower-ranked workload of the same project {job.project}"
        if not self.tree.is_budgeted(victim.project):
            return f"project {victim.project} has no budget share"
        return (
            f"project {job.project} is below its entitlement "
            f"({self.alloc.get(job.project, 0)} of {self.entitled.get(job.project, 0)} GPUs) "
            f"and reclaims from {victim.project}, which runs above its own "
            f"({self.alloc.get(victim.project, 0)} of {self.entitled.get(victim.project, 0)})"
        )

    def signature(self, job: Job) -> object:
        # What may open a victim for ``job`` without any node changing: its project's debug
        # GPUs falling (own-project evictions within the debug allowance), and, for a job
        # that may reclaim, any team's room above its entitlement growing. Each room, not
        # their total: one team's room shrinking while another's grows by as much opens
        # victims a total hides (a rebuilt engine, which has no memo, found them at once).
        debug = 0
        if job.mr <= self.inputs.params.debug_min_runtime:
            debug = self.debug_alloc.get(job.project, 0)
        return (debug, self._growth.count if self.may_reclaim(job) else None)

    def still_blocked(self, old: object, new: object) -> bool:
        # Blocked still unless the debug GPUs fell, the job may reclaim now and could not
        # before, or some team's room grew since; rooms that only shrank open no victim.
        if not isinstance(old, tuple) or not isinstance(new, tuple):
            return False
        old_debug, old_growth = old
        new_debug, new_growth = new
        if new_debug < old_debug:
            return False
        return new_growth is None or new_growth == old_growth

    def grown_since(self, old: object, new: object) -> list[str] | None:
        # Only rooms grew (the debug GPUs did not fall, the job could reclaim then and can
        # now): a new victim can only be work of a team whose room grew.
        if not isinstance(old, tuple) or not isinstance(new, tuple):
            return None
        old_debug, old_growth = old
        new_debug, new_growth = new
        if new_debug < old_debug or old_growth is None or new_growth is None:
            return None
        return self._growth.teams[old_growth:new_growth]

    def _count(self, job: Job, sign: int) -> None:
        if job.charged:
            before = self.alloc.get(job.project, 0)
            self.alloc[job.project] = before + sign * job.gpus
            self._track_borrowing(job.project)
            if job.mr <= self.inputs.params.debug_min_runtime:
                debug = self.debug_alloc.get(job.project, 0) + sign * job.gpus
                self.debug_alloc[job.project] = debug

    def _track_borrowing(self, project: str) -> None:
        """Keep ``project``'s room above its entitlement after its charged GPUs changed."""
        entitled = self.entitled.get(project, 0)
        now = self.alloc.get(project, 0)
        if now > entitled:
            room = now - entitled
            if room > self._rooms.get(project, 0):
                self._growth.grew(project)
            self._rooms[project] = room
        else:
            self._rooms.pop(project, None)

    def started(self, job: Job) -> None:
        if job.swapped_for is not None:
            # Counted as swapped out (when the view began, or when this walk swapped it):
            # from now on it counts as running, not as both. A swap whose swapper had
            # stopped was forgotten before the view began (``swapped_gpus``).
            left = self._swapped.get(job.project, 0) - job.gpus
            if left > 0:
                self._swapped[job.project] = left
            else:
                self._swapped.pop(job.project, None)
        self._count(job, +1)

    def evicted(self, job: Job) -> None:
        self._count(job, -1)


class FairShare(Policy):
    """Ours: entitlement first, then Fair Tree over the sliding window (``docs/design.md``)."""

    name = "fairshare"
    preempts = True
    free_lane = True
    patient = True
    churn_budget = True
    short_first = True
    lends_holds = True
    consolidates = True

    def __init__(self) -> None:
        # Kept across cycles: one instance per scheduler (``make_policy`` makes a new one).
        self._growth = _RoomGrowth()

    def key(self, w: Workload, min_runtime: float) -> tuple:
        """Order inside a project: priority, then shorter minimum runtime, then a debug job's
        place in its submitter's burst (``Workload.burst_rank``: a person's lone job before
        the hundredth job of a sweep), then submit time and id."""
        return (-w.priority, min_runtime, w.burst_rank, w.submit_time, w.id)

    def begin(self, inputs: CycleInputs) -> PolicyView:
        order = inputs.usage_order
        if order is None:
            order = inputs.tree.order(inputs.usage, inputs.projects)
        return _FairShareView(inputs, order, self._growth)

    def usage_order(
        self, tree: BudgetTree, usage: Mapping[str, float], projects: list[str]
    ) -> list[str] | None:
        return tree.order(usage, projects)
