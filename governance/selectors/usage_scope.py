"""What part of the budget tree a user sees whole: the nodes whose usage totals are theirs.

A node's total is shown only to those who see every node below it (org admin and finance:
the organization and below; a program manager: their program and its projects; PI and
researcher: their project), so no total reveals another team's usage.
"""

from __future__ import annotations

from typing import NamedTuple

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

from governance.models import Organization, Program, Project


class WhollyVisible(NamedTuple):
    """The organizations, programs and projects a user sees with their whole subtree, each
    by name."""

    organizations: list[Organization]
    programs: list[Program]
    projects: list[Project]


def whole_organization_ids(visibility) -> frozenset:
    """Organizations whose whole tree the user sees (org admin, finance)."""
    return visibility.admin_org_ids | visibility.finance_org_ids


def wholly_visible(visibility) -> WhollyVisible:
    """(organizations, programs, projects) the user sees with their whole subtree."""
    org_ids = whole_organization_ids(visibility)
    organizations = list(Organization.objects.filter(id__in=org_ids).order_by("name", "id"))
    programs = list(
        Program.objects.filter(
            Q(organization_id__in=org_ids) | Q(id__in=visibility.managed_program_ids)
        ).order_by("name", "id")
    )
    projects = list(visibility.projects().order_by("name", "id"))
    return WhollyVisible(organizations, programs, projects)


def node_wholly_visible(*, visibility, node) -> bool:
    """True when the user sees ``node`` and everything below it (so its totals are theirs)."""
    org_ids = whole_organization_ids(visibility)
    if isinstance(node, Organization):
        return node.pk in org_ids
    if isinstance(node, Program):
        return node.organization_id in org_ids or node.pk in visibility.managed_program_ids
    if isinstance(node, Project):
        return visibility.projects().filter(pk=node.pk).exists()
    return False


def subtree_projects(*, visibility, node) -> QuerySet[Project]:
    """Visible projects under ``node`` (all visible projects when ``node`` is None)."""
    projects = visibility.projects()
    if node is None:
        return projects
    if not node_wholly_visible(visibility=visibility, node=node):
        raise PermissionDenied("You cannot see all of this node's usage.")
    if isinstance(node, Organization):
        return projects.filter(program__organization_id=node.pk)
    if isinstance(node, Program):
        return projects.filter(program_id=node.pk)
    return projects.filter(pk=node.pk)
