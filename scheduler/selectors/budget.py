"""The budget tree of a cluster as the engine and the usage ledger see it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from governance.models import Cluster, Program, Project
from governance.selectors.tree import shares_at
from scheduler.engine import BudgetNode

HUNDRED = Decimal("100")


@dataclass
class ClusterBudget:
    """The tree on one cluster at one instant.

    ``root`` is the engine's ``BudgetNode`` tree (only nodes holding a share; projects
    without one are unbudgeted for the engine). ``effective`` is each budgeted project's
    effective share in percent of the cluster. ``keys`` maps project id → the engine's
    project name (``program-slug/project-slug``: readable in reasons, unique in the org).
    ``shares`` is every node's share in force (``governance.selectors.tree.shares_at``), also
    those the engine leaves out.
    """

    root: BudgetNode
    effective: dict[int, Decimal] = field(default_factory=dict)
    keys: dict[int, str] = field(default_factory=dict)
    shares: dict[tuple[str, int], Decimal] = field(default_factory=dict)

    def key(self, project_id: int) -> str:
        """The engine's name for a project (also for projects outside the cluster's org)."""
        return self.keys.get(project_id) or f"project-{project_id}"


@dataclass(frozen=True)
class TreeRows:
    """The shape of an organization's tree as plain rows: its slug, its programs ``(id,
    slug)`` and its projects ``(id, slug, program_id)``. What ``budget_from`` needs besides
    the shares; comparable and ``repr``-able, so a cache key may hold it."""

    organization_slug: str
    programs: tuple[tuple[int, str], ...]
    projects: tuple[tuple[int, str, int], ...]


def tree_rows(*, cluster: Cluster) -> TreeRows:
    """The tree of ``cluster``'s organization as ``TreeRows``. Two queries."""
    # Plain rows, not model objects: the live cycle reads the tree every cycle.
    programs = Program.objects.filter(organization_id=cluster.organization_id)
    projects = Project.objects.filter(program__organization_id=cluster.organization_id)
    return TreeRows(
        organization_slug=cluster.organization.slug,
        # By id: the same tree reads as the same rows (a cache key), whatever the plan.
        programs=tuple(programs.order_by("id").values_list("id", "slug")),
        projects=tuple(projects.order_by("id").values_list("id", "slug", "program_id")),
    )


def budget_from(tree: TreeRows, shares: dict[tuple[str, int], Decimal]) -> ClusterBudget:
    """The ``ClusterBudget`` of ``tree`` with ``shares`` in force (``shares_at``'s form)."""
    program_slug = dict(tree.programs)
    budget = ClusterBudget(root=BudgetNode(tree.organization_slug, 100.0, []), shares=shares)
    program_nodes: dict[int, BudgetNode] = {}
    for program_id, slug in tree.programs:
        share = shares.get(("program", program_id), Decimal(0))
        if share > 0:
            node = BudgetNode(slug, float(share), [])
            program_nodes[program_id] = node
            budget.root.children.append(node)
    for project_id, slug, program_id in tree.projects:
        key = f"{program_slug[program_id]}/{slug}"
        budget.keys[project_id] = key
        share = shares.get(("project", project_id), Decimal(0))
        parent = program_nodes.get(program_id)
        if share > 0 and parent is not None:
            parent.children.append(BudgetNode(key, float(share), []))
            program_share = shares[("program", program_id)]
            budget.effective[project_id] = program_share * share / HUNDRED
    return budget


def cluster_budget(*, cluster: Cluster, at: datetime) -> ClusterBudget:
    """The budget tree of ``cluster``'s organization with shares as of ``at``. Three queries
    (four when ``cluster.organization`` is not loaded yet).

    Shares follow the effective-dating rule of ``governance.selectors.tree.shares_at``.
    """
    return budget_from(tree_rows(cluster=cluster), shares_at(cluster=cluster, at=at))
