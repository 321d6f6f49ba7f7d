"""Who holds which role on which node of the budget tree."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from governance.choices import ORGANIZATION_ROLES, PROGRAM_ROLES, PROJECT_ROLES, Role
from governance.models.tree import Organization, Program, Project


class RoleAssignment(models.Model):
    """A user's role on one node of the tree; it applies to the node's whole subtree.

    Org admin and finance are held on an organization, program manager on a program, PI and
    researcher on a project. Exactly one of the three scope columns is set, matching the role.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="roles"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    organization = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="role_assignments",
    )
    program = models.ForeignKey(
        Program, null=True, blank=True, on_delete=models.CASCADE, related_name="role_assignments"
    )
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="role_assignments"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user_id", "role"]
        constraints = [
            models.CheckConstraint(
                condition=Q(role__in=Role.values), name="role_assignment_role_valid"
            ),
            models.CheckConstraint(
                condition=(
                    Q(
                        role__in=ORGANIZATION_ROLES,
                        organization__isnull=False,
                        program__isnull=True,
                        project__isnull=True,
                    )
                    | Q(
                        role__in=PROGRAM_ROLES,
                        organization__isnull=True,
                        program__isnull=False,
                        project__isnull=True,
                    )
                    | Q(
                        role__in=PROJECT_ROLES,
                        organization__isnull=True,
                        program__isnull=True,
                        project__isnull=False,
                    )
                ),
                name="role_assignment_scope_matches_role",
            ),
            # One constraint per scope column: "unique with nulls not distinct" is not
            # available on SQLite (the quick start), partial unique indexes are everywhere.
            *(
                models.UniqueConstraint(
                    fields=["user", "role", scope],
                    condition=Q(**{f"{scope}__isnull": False}),
                    name=f"role_assignment_unique_on_{scope}",
                )
                for scope in ("organization", "program", "project")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} — {self.get_role_display()} of {self.scope}"

    @property
    def scope(self) -> Organization | Program | Project:
        """The node of the tree this role is held on."""
        return self.organization or self.program or self.project
