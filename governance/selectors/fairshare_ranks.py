"""The engine's Fair Tree ranking of a cluster's tree at one instant, keyed by ``(kind, id)``.

``scheduler.engine.fairtree.BudgetTree.rank`` does the ranking; this module feeds it the
budget in force and the usage of the window, and names its nodes as the page does. Past
instants are ranked once and kept while their usage is final (``past_points``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from governance.models import Cluster
from governance.selectors.fairshare_history import past_usage
from governance.selectors.tree import ShareRow, pick_shares
from governance.selectors.usage_sources import kept_while_final
from scheduler.engine.fairtree import BudgetTree, Ranking
from scheduler.selectors.budget import ClusterBudget, TreeRows, budget_from


def budgets_at(
    tree: TreeRows, rows: list[ShareRow], instants: list[datetime]
) -> list[ClusterBudget]:
    """The budget at each instant (``cluster_budget``'s, from rows already read), built once
    per distinct set of share rows in force."""
    budgets: list[ClusterBudget] = []
    cache: dict[frozenset, ClusterBudget] = {}
    for t in instants:
        signature = frozenset(row.order for row in rows if row.covers(t))
        if signature not in cache:
            cache[signature] = budget_from(tree, pick_shares(rows, t))
        budgets.append(cache[signature])
    return budgets


@dataclass
class TreeInputs:
    """What every instant's ranking reads besides usage, read once per page."""

    cluster: Cluster
    tree: TreeRows
    share_rows: list[ShareRow]
    programs_by_slug: dict[str, int]
    project_ids: list[int]


@dataclass
class Ranked:
    """One instant's ranking keyed by ``(kind, id)``: metric, sibling rank, sibling count."""

    ranking: Ranking
    metric: dict[tuple[str, int], float | None]
    sibling_rank: dict[tuple[str, int], int]
    siblings: dict[tuple[str, int], int]
    usage: dict[tuple[str, int], float]
    usage_share: dict[tuple[str, int], float | None]
    budgeted_projects: int


@dataclass
class TreeIndex:
    """A budget's Fair Tree and the ``(kind, id)`` of each of its nodes, built once for every
    instant of the history that has the same budget (most have)."""

    tree: BudgetTree
    keys: list[tuple[str, int] | None]
    project_by_key: dict[str, int]
    extra: list[str]


def index_tree(
    budget: ClusterBudget,
    organization_id: int,
    programs_by_slug: dict[str, int],
    all_project_ids: list[int],
) -> TreeIndex:
    """The tree of ``budget`` with each node's ``(kind, id)`` (None: not in the database)."""
    tree = BudgetTree(budget.root)
    project_by_key = {budget.key(pid): pid for pid in all_project_ids}
    keys: list[tuple[str, int] | None] = []
    for node in tree.nodes:
        if node.parent < 0:
            keys.append(("organization", organization_id))
        elif node.project is not None:
            pid = project_by_key.get(node.project)
            keys.append(("project", pid) if pid is not None else None)
        else:
            pid = programs_by_slug.get(node.name)
            keys.append(("program", pid) if pid is not None else None)
    return TreeIndex(tree, keys, project_by_key, [budget.key(pid) for pid in all_project_ids])


def rank_budget(
    budget: ClusterBudget, tree_index: TreeIndex, usage_by_project: dict[int, float]
) -> Ranked:
    """Run the engine's Fair Tree ranking and key its per-node figures by ``(kind, id)``."""
    tree, keys, project_by_key = tree_index.tree, tree_index.keys, tree_index.project_by_key
    usage = {budget.key(pid): amount for pid, amount in usage_by_project.items()}
    ranking = tree.rank(usage, extra=tree_index.extra)
    metric, sibling_rank, siblings, node_usage, usage_share = {}, {}, {}, {}, {}
    for index, node in enumerate(tree.nodes):
        key = keys[index]
        if key is None:
            continue
        node_usage[key] = ranking.usage[index]
        if node.parent < 0:
            continue
        parent_usage = ranking.usage[node.parent]
        # usage share ÷ share = (usage / parent usage) / (share / 100) = engine ratio x 100 /
        # parent usage: the engine's own ratio, scaled by a factor common to all siblings.
        # With nothing used under the parent the share of usage is undefined (the engine
        # sees equal ratios and ranks by name): no metric rather than a misleading 0.
        metric[key] = ranking.ratio[index] * 100 / parent_usage if parent_usage > 0 else None
        usage_share[key] = ranking.usage[index] / parent_usage * 100 if parent_usage > 0 else None
        sibling_rank[key] = ranking.sibling_rank[index] + 1
        siblings[key] = len(tree.nodes[node.parent].children)
    for project, amount in ranking.project_usage.items():
        pid = project_by_key.get(project)
        if pid is not None:
            node_usage.setdefault(("project", pid), amount)
    return Ranked(
        ranking=ranking,
        metric=metric,
        sibling_rank=sibling_rank,
        siblings=siblings,
        usage=node_usage,
        usage_share=usage_share,
        budgeted_projects=len(tree.path),
    )


def ranked_all(inputs: TreeInputs, budgets: list[ClusterBudget], usage: list) -> list[Ranked]:
    """``rank_budget`` of each budget with its usage, one tree index per distinct budget."""
    organization_id = inputs.cluster.organization_id
    indexes: dict[int, TreeIndex] = {}  # by budget: instants with the same shares share one
    ranked = []
    for budget, amounts in zip(budgets, usage, strict=True):
        tree_index = indexes.get(id(budget))
        if tree_index is None:
            tree_index = indexes[id(budget)] = index_tree(
                budget, organization_id, inputs.programs_by_slug, inputs.project_ids
            )
        ranked.append(rank_budget(budget, tree_index, amounts))
    return ranked


class PastPoint(NamedTuple):
    """A past instant's part of each row: its metric and sibling rank, keyed by ``(kind, id)``."""

    metric: dict[tuple[str, int], float | None]
    sibling_rank: dict[tuple[str, int], int]


def past_points(inputs: TreeInputs, instants: list[datetime], window: timedelta):
    """Each past instant's metrics and sibling ranks, kept while every hour they read is
    final (``kept_while_final``) and the tree and its share rows are as they were — ranking
    a fortnight of instants is most of the page's work, and the past does not change."""
    if not instants:
        return []

    def make() -> list[PastPoint]:
        usage = past_usage(inputs.cluster, instants, window)
        budgets = budgets_at(inputs.tree, inputs.share_rows, instants)
        return [PastPoint(r.metric, r.sibling_rank) for r in ranked_all(inputs, budgets, usage)]

    return kept_while_final(
        "fairshare:past-ranking",
        cluster_ids=[inputs.cluster.pk],
        end=instants[-1],
        inputs=(
            window.total_seconds(),
            [t.timestamp() for t in instants],
            inputs.tree,
            sorted(
                (
                    r.order,
                    r.node,
                    str(r.percent),
                    r.valid_from.timestamp(),
                    r.valid_to and r.valid_to.timestamp(),
                )
                for r in inputs.share_rows
            ),
        ),
        make=make,
    )
