"""Read the budget tree of a cluster for the queue generator (the only Django part of it)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from governance.models import Cluster, Program, Project
from governance.selectors.tree import node_key, shares_at
from scheduler.adapters.kai.queues import TreeNode

ZERO = Decimal("0")


def kai_tree_read(*, cluster: Cluster, at: datetime | None = None) -> TreeNode:
    """The organization of ``cluster`` with every program and project and its share at ``at``.

    Shares come from ``governance.selectors.tree.shares_at`` — the reading the tree page, the
    fair-share dashboard and the live cycle (``scheduler.selectors.budget.cluster_budget``)
    use — so queues show the same budget. Nodes without a share are included with 0 %
    (they become queues with no quota). Three queries.
    """
    at = at or timezone.now()
    shares = shares_at(cluster=cluster, at=at)
    organization = cluster.organization
    projects_by_program: dict[int, list[Project]] = {}
    for project in Project.objects.filter(program__organization=organization):
        projects_by_program.setdefault(project.program_id, []).append(project)
    programs = []
    for program in Program.objects.filter(organization=organization):
        programs.append(
            TreeNode(
                kind="program",
                slug=program.slug,
                name=program.name,
                share=shares.get(node_key(program), ZERO),
                id=program.pk,
                children=tuple(
                    TreeNode(
                        kind="project",
                        slug=project.slug,
                        name=project.name,
                        share=shares.get(node_key(project), ZERO),
                        id=project.pk,
                    )
                    for project in projects_by_program.get(program.pk, [])
                ),
            )
        )
    return TreeNode(
        kind="organization",
        slug=organization.slug,
        name=organization.name,
        children=tuple(programs),
        id=organization.pk,
    )
