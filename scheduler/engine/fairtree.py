"""Fair Tree ranking of projects over the budget tree (Slurm's ``fair_tree`` idea).

At every level of the tree, siblings are ranked by usage-share / share, lowest first (Slurm's
Level Fairshare ``LF = S / U`` ranked highest first is the same order). Projects are then
ranked by a depth-first walk of the sorted tree, so if account A ranks above its sibling B,
every project under A ranks above every project under B. Ties go to the lower name (Slurm
merges tied siblings instead; a name tie-break keeps the order total and deterministic).

Projects that are not a leaf of the tree, or whose effective share is 0, are *unbudgeted*:
they rank after every budgeted project, among themselves by usage (lowest first), then name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.engine.model import BudgetNode
from scheduler.engine.names import interned


@dataclass(slots=True)
class TreeNode:
    """A flattened budget-tree node: index, parent, raw share and children (sorted by name)."""

    index: int
    name: str
    share: float
    parent: int
    depth: int
    children: list[int] = field(default_factory=list)
    project: str | None = None


class Ranking:
    """One cycle's Fair Tree result.

    ``order`` lists budgeted projects then unbudgeted ones (only those passed in ``extra``
    for the latter); ``rank`` maps a project to its index in ``order``. ``usage`` and
    ``ratio`` are per tree node (usage / raw share; ``inf`` for a zero share).
    """

    # A plain class, not a dataclass: built every cycle (see ``CycleInputs``).
    def __init__(
        self,
        *,
        order: list[str],
        rank: dict[str, int],
        usage: list[float],
        ratio: list[float],
        sibling_rank: list[int],
        project_usage: dict[str, float],
        total_usage: float,
    ) -> None:
        self.order = order
        self.rank = rank
        self.usage = usage
        self.ratio = ratio
        self.sibling_rank = sibling_rank
        self.project_usage = project_usage
        self.total_usage = total_usage


class BudgetTree:
    """The budget tree, flattened once, ranking projects for any usage mapping."""

    def __init__(self, root: BudgetNode | None) -> None:
        self.nodes: list[TreeNode] = []
        self.leaf_of: dict[str, int] = {}
        self.effective_share: dict[str, float] = {}
        self.path: dict[str, tuple[int, ...]] = {}
        # healthy GPUs -> (deserved GPUs, whole GPUs) per project: asked for every cycle,
        # changed only by a node changing state.
        self._gpus: dict[int, tuple[dict[str, float], dict[str, int]]] = {}
        if root is not None:
            self._add(root, parent=-1, depth=0, effective=1.0, path=())
        self._shares = [node.share for node in self.nodes]
        self._leaves = list(self.leaf_of.items())
        # The last ``order``'s sorted children of every inner node, and its budgeted order:
        # while each level's siblings keep their order, so does the whole (``order``). One
        # tuple, replaced whole, so a reader never sees the levels of one call with the
        # order of another.
        self._kept: tuple[list[list[int]], list[str]] | None = None
        # The last list of projects ``_unbudgeted`` was given (a copy) and those of them
        # without a budget: a scheduler passes the same projects cycle after cycle.
        self._extra_seen: tuple[list[str], set[str]] = ([], set())

    def _add(
        self, node: BudgetNode, parent: int, depth: int, effective: float, path: tuple[int, ...]
    ) -> None:
        if not 0 <= node.share <= 100:
            raise ValueError(f"budget node {node.name!r}: share {node.share} is outside 0-100")
        index = len(self.nodes)
        share = 100.0 if parent < 0 else float(node.share)
        effective = effective * share / 100.0
        # Interned, as the scheduler interns workloads' projects: the per-project tables
        # of every cycle are then looked up by identity, not by comparing characters.
        name = interned(node.name)
        tree_node = TreeNode(index, name, share, parent, depth)
        self.nodes.append(tree_node)
        path = (*path, index)
        if parent >= 0:
            self.nodes[parent].children.append(index)
        if not node.children:
            if parent < 0:
                return  # a lone root budgets nothing
            if name in self.leaf_of:
                raise ValueError(f"budget tree: project {name!r} appears twice")
            tree_node.project = name
            self.leaf_of[name] = index
            if effective > 0:
                self.effective_share[name] = effective
                self.path[name] = path
            return
        # Children sorted by name so every later walk is independent of the input's order.
        for child in sorted(node.children, key=lambda c: c.name):
            self._add(child, index, depth + 1, effective, path)

    def is_budgeted(self, project: str) -> bool:
        """True when ``project`` is a leaf with a non-zero effective share."""
        return project in self.path

    def parent_name(self, project: str) -> tuple[str, int] | None:
        """The name and depth of the project's parent node, or None if unbudgeted."""
        path = self.path.get(project)
        if not path or len(path) < 2:
            return None
        parent = self.nodes[path[-2]]
        return parent.name, parent.depth

    def deserved_gpus(self, healthy_gpus: int) -> dict[str, float]:
        """GPUs each budgeted project deserves out of ``healthy_gpus`` (share x GPUs).

        The mapping is shared between callers: read it, do not change it.
        """
        return self._split(healthy_gpus)[0]

    def entitled_gpus(self, healthy_gpus: int) -> dict[str, int]:
        """``deserved_gpus`` in whole GPUs that add up to the cluster (largest remainder,
        ties by name). Shared between callers like ``deserved_gpus``."""
        return self._split(healthy_gpus)[1]

    def _split(self, healthy_gpus: int) -> tuple[dict[str, float], dict[str, int]]:
        split = self._gpus.get(healthy_gpus)
        if split is None:
            deserved = {p: s * healthy_gpus for p, s in self.effective_share.items()}
            split = self._gpus[healthy_gpus] = (deserved, _whole_gpus(deserved))
        return split

    def rank(self, usage: Mapping[str, float], extra: Iterable[str] = ()) -> Ranking:
        """Rank budgeted projects by Fair Tree, then the unbudgeted ones in ``extra``.

        ``usage`` is charged GPU-seconds per project over the window; it is summed up the
        tree here. Cost is linear in the tree size (plus sorting siblings).
        """
        project_usage: dict[str, float] = {}
        node_usage = self._node_usage(usage, project_usage)
        ratio = self._ratios(node_usage)
        sibling_rank = [0] * len(node_usage)
        order = self._budgeted_order(ratio, sibling_rank)
        unbudgeted = self._unbudgeted(usage, extra)
        for project in unbudgeted:
            project_usage[project] = float(usage.get(project, 0.0))
        order.extend(unbudgeted)
        total = 0.0
        for u in usage.values():
            total += float(u)
        return Ranking(
            order=order,
            rank={p: i for i, p in enumerate(order)},
            usage=node_usage,
            ratio=ratio,
            sibling_rank=sibling_rank,
            project_usage=project_usage,
            total_usage=total,
        )

    def order(self, usage: Mapping[str, float], extra: Iterable[str] = ()) -> list[str]:
        """``rank(usage, extra).order`` alone, at a fraction of the cost (a scheduler asks
        it every cycle, and when only time has passed, to learn whether the order moved).

        Usage moves little from one cycle to the next, so the last call's order is checked
        before it is built again: when every inner node's children, as that call sorted
        them, are still sorted by ratio (ties by name), the budgeted order is the same.
        """
        ratio = self._ratios(self._node_usage(usage, None))
        kept = self._kept
        if kept is not None and _still_sorted(kept[0], ratio):
            order = list(kept[1])
        else:
            levels: list[list[int]] = []
            order = self._budgeted_order(ratio, None, levels)
            self._kept = (levels, list(order))
        order.extend(self._unbudgeted(usage, extra))
        return order

    def _node_usage(
        self, usage: Mapping[str, float], project_usage: dict[str, float] | None
    ) -> list[float]:
        """Usage per tree node: each leaf's project's, summed up the tree."""
        nodes = self.nodes
        node_usage = [0.0] * len(nodes)
        by_project = _as_dict(usage)
        for project, leaf in self._leaves:
            u = float(by_project.get(project, 0.0))
            node_usage[leaf] = u
            if project_usage is not None:
                project_usage[project] = u
        # Children always come after their parent in ``nodes``: sum bottom-up in reverse.
        for index in range(len(nodes) - 1, 0, -1):
            node_usage[nodes[index].parent] += node_usage[index]
        return node_usage

    def _ratios(self, node_usage: list[float]) -> list[float]:
        """Usage divided by raw share per node (``inf`` for a zero share)."""
        shares = self._shares
        ratio = [0.0] * len(node_usage)
        for index in range(len(node_usage)):
            share = shares[index]
            ratio[index] = node_usage[index] / share if share > 0 else math.inf
        return ratio

    def _budgeted_order(
        self,
        ratio: list[float],
        sibling_rank: list[int] | None,
        levels: list[list[int]] | None = None,
    ) -> list[str]:
        """Budgeted projects depth first, siblings by ratio (ties by name: children are kept
        sorted by name and the sort is stable); fills ``sibling_rank`` when given, and
        ``levels`` with each inner node's children as sorted."""
        nodes = self.nodes
        path = self.path
        order: list[str] = []
        if not nodes:
            return order
        stack = [0]
        while stack:
            node = nodes[stack.pop()]
            leaf_project = node.project
            if leaf_project is not None:
                if leaf_project in path:
                    order.append(leaf_project)
                continue
            kids = _by_ratio(node.children, ratio)
            if sibling_rank is not None:
                for position, child in enumerate(kids):
                    sibling_rank[child] = position
            if levels is not None and len(kids) > 1:
                levels.append(list(kids))
            kids.reverse()
            stack.extend(kids)
        return order

    def _unbudgeted(self, usage: Mapping[str, float], extra: Iterable[str]) -> list[str]:
        """The projects of ``extra`` without a budget, least usage first, then by name."""
        seen, extra_projects = self._extra_seen
        if not isinstance(extra, list) or extra != seen:
            path = self.path
            extra_projects = {p for p in extra if p not in path}
            if isinstance(extra, list):
                self._extra_seen = (list(extra), extra_projects)
        if not extra_projects:
            return []
        by_project = _as_dict(usage)
        return sorted(extra_projects, key=lambda p: (float(by_project.get(p, 0.0)), p))


def _as_dict(usage: Mapping[str, float]) -> dict[str, float]:
    """``usage`` as a dict (itself when it is one: the native build reads dicts directly)."""
    return usage if isinstance(usage, dict) else dict(usage)


def _still_sorted(levels: list[list[int]], ratio: list[float]) -> bool:
    """Is each list of siblings in ``levels`` still in ``_by_ratio``'s order for ``ratio``:
    ratio ascending, equal ratios in name order (siblings' positions grow with their names)?
    A ratio that is not a number sorts nowhere: the order is built again."""
    for kids in levels:
        before = kids[0]
        before_ratio = ratio[before]
        if before_ratio != before_ratio:
            return False
        for i in range(1, len(kids)):
            child = kids[i]
            value = ratio[child]
            if value < before_ratio or value != value:
                return False
            if value == before_ratio and child < before:
                return False
            before = child
            before_ratio = value
    return True


def _by_ratio(children: list[int], ratio: list[float]) -> list[int]:
    """``children`` (kept in name order) sorted by ratio, stably: ties stay in name order.

    Siblings are few in a budget tree, so an insertion sort on the numbers themselves beats
    calling a key function per child; a wide level (a flat organization of many teams)
    takes the library sort.
    """
    if len(children) > 16:
        return sorted(children, key=ratio.__getitem__)
    kids = list(children)
    for i in range(1, len(kids)):
        child = kids[i]
        value = ratio[child]
        j = i - 1
        while j >= 0 and ratio[kids[j]] > value:
            kids[j + 1] = kids[j]
            j -= 1
        kids[j + 1] = child
    return kids


def _whole_gpus(deserved: dict[str, float]) -> dict[str, int]:
    """Round deserved GPUs to whole GPUs keeping their sum (largest remainder, ties by name).

    Rounding every team up would promise more GPUs than exist, so on a full cluster some
    team would always be "below its entitlement" and reclaim from the others for ever.
    """
    caps = {p: int(d) for p, d in deserved.items()}
    spare = round(sum(deserved.values())) - sum(caps.values())
    by_remainder = sorted(deserved, key=lambda p: (-(deserved[p] - caps[p]), p))
    for p in by_remainder[: max(0, spare)]:
        caps[p] += 1
    return caps
