"""Who may grant and revoke which roles, and the role assignments a manager sees.

The rule (docs/reliability.md, "Audit trail"): an org admin manages every role of their
organization — org admin and finance on it, program manager on its programs, PI and
researcher on its projects. A program manager manages the researcher role on their
program's projects (bringing a researcher onto a project should not wait for an org admin),
nothing more: a researcher acts only on their own work, while a PI may cancel the project's
work, so a grant that lets a person act on others' work needs the org admin. Nobody grants
a role to themselves (``governance.services.roles``). Nobody else manages roles.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from governance.choices import ORGANIZATION_ROLES, PROGRAM_ROLES, PROJECT_ROLES, Role
from governance.models import Organization, Program, Project, RoleAssignment
from governance.selectors.visibility import Visibility

# The roles a program manager manages on their program's projects: only those that act on
# nobody else's work.
MANAGER_ROLES = (Role.RESEARCHER,)

# Which model of the tree each role is held on.
SCOPE_MODEL = {
    **{role: Organization for role in ORGANIZATION_ROLES},
    **{role: Program for role in PROGRAM_ROLES},
    **{role: Project for role in PROJECT_ROLES},
}


def role_can_manage(
    *, visibility: Visibility, role: str, scope: Organization | Program | Project
) -> bool:
    """May this user grant or revoke ``role`` on ``scope``? (The rule in the module docstring.)"""
    if isinstance(scope, Organization):
        return visibility.is_org_admin(scope.pk)
    if isinstance(scope, Program):
        return visibility.is_org_admin(scope.organization_id)
    if isinstance(scope, Project):
        if visibility.is_org_admin(scope.program.organization_id):
            return True
        return role in MANAGER_ROLES and scope.program_id in visibility.managed_program_ids
    return False


def role_managers_anywhere(*, visibility: Visibility) -> bool:
    """True when the user may manage some roles (org admins and program managers)."""
    return bool(visibility.admin_org_ids or visibility.managed_program_ids)


def role_assignments_manageable(*, visibility: Visibility) -> QuerySet[RoleAssignment]:
    """Role assignments this user may revoke, people first by name, with their scope loaded."""
    admin = visibility.admin_org_ids
    managed = visibility.managed_program_ids
    return (
        RoleAssignment.objects.filter(
            Q(organization_id__in=admin)
            | Q(program__organization_id__in=admin)
            | Q(project__program__organization_id__in=admin)
            | Q(project__program_id__in=managed, role__in=MANAGER_ROLES)
        )
        .select_related("user", "organization", "program", "project__program")
        .order_by("user__username", "role", "id")
    )


def role_scopes_grantable(*, visibility: Visibility) -> list[tuple[str, str, object]]:
    """Every (role, scope key, scope) this user may grant, for forms and validation.

    The scope key is ``"<kind>:<id>"`` (``organization:1``, ``program:3``, ``project:7``).
    """
    options: list[tuple[str, str, object]] = []
    orgs = Organization.objects.filter(id__in=visibility.admin_org_ids).order_by("name")
    programs = Program.objects.filter(organization_id__in=visibility.admin_org_ids)
    projects = Project.objects.filter(
        Q(program__organization_id__in=visibility.admin_org_ids)
        | Q(program_id__in=visibility.managed_program_ids)
    ).select_related("program")
    for org in orgs:
        for role in ORGANIZATION_ROLES:
            options.append((role, f"organization:{org.pk}", org))
    for program in programs.order_by("name"):
        for role in PROGRAM_ROLES:
            options.append((role, f"program:{program.pk}", program))
    for project in projects.order_by("program__name", "name"):
        admin = project.program.organization_id in visibility.admin_org_ids
        for role in PROJECT_ROLES if admin else MANAGER_ROLES:
            options.append((role, f"project:{project.pk}", project))
    return options


def scope_label(scope: Organization | Program | Project) -> str:
    """A scope as people read it: "project Detection (Vision)", "organization Acme"."""
    if isinstance(scope, Project):
        return f"project {scope.name} ({scope.program.name})"
    if isinstance(scope, Program):
        return f"program {scope.name}"
    return f"organization {scope.name}"


def role_label(role: str) -> str:
    """The role's display name ("PI (project lead)")."""
    return Role(role).label
