"""Granting and revoking roles on the budget tree, each change in the audit trail.

Who may do what is ``governance.selectors.roles.role_can_manage``: org admins for their
organization, program managers for the researcher role on their program's projects. Nobody
grants a role to themselves.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from governance.choices import AuditAction, Role
from governance.models import Organization, Program, Project, RoleAssignment
from governance.selectors.roles import SCOPE_MODEL, role_can_manage, role_label, scope_label
from governance.selectors.visibility import user_visibility
from governance.services.audit import audit_record

MAX_REASON_LENGTH = 500


def _organization_id(scope: Organization | Program | Project) -> int:
    if isinstance(scope, Organization):
        return scope.pk
    if isinstance(scope, Program):
        return scope.organization_id
    return scope.program.organization_id


def _reason(reason: str) -> str:
    reason = str(reason or "").strip()
    if len(reason) > MAX_REASON_LENGTH:
        raise ValidationError({"reason": [f"At most {MAX_REASON_LENGTH} characters."]})
    return reason


def _scope_fields(scope) -> dict:
    return {
        "organization": scope if isinstance(scope, Organization) else None,
        "program": scope if isinstance(scope, Program) else None,
        "project": scope if isinstance(scope, Project) else None,
    }


def role_grant(
    *, actor, user, role: str, scope: Organization | Program | Project, reason: str = ""
) -> RoleAssignment:
    """Give ``user`` the ``role`` on ``scope`` (and so on its subtree); return the assignment.

    ``ValidationError`` naming ``role`` (unknown role, or the user holds it there already),
    ``scope`` (the role is not held on that level: org admin and finance on an organization,
    program manager on a program, PI and researcher on a project), ``user`` (missing or
    inactive) or ``reason`` (too long). ``PermissionDenied`` when the actor may not manage
    that role there, or grants it to themselves. Recorded in the audit trail (``role_granted``) in the same transaction.
    """
    if role not in Role.values:
        raise ValidationError({"role": [f"{role!r} is not a role; choose one of {Role.values}."]})
    if not isinstance(scope, SCOPE_MODEL[role]):
        level = SCOPE_MODEL[role]._meta.verbose_name
        raise ValidationError({"scope": [f"A {role_label(role)} role is held on a {level}."]})
    if not role_can_manage(visibility=user_visibility(user=actor), role=role, scope=scope):
        raise PermissionDenied(f"You may not grant the {role_label(role)} role on {scope}.")
    if user is not None and actor is not None and user.pk == actor.pk:
        raise PermissionDenied("Nobody grants a role to themselves; ask another manager.")
    if user is None or not isinstance(user, get_user_model()) or not user.is_active:
        raise ValidationError({"user": ["Choose an active user."]})
    reason = _reason(reason)
    with transaction.atomic():
        if RoleAssignment.objects.filter(user=user, role=role, **_scope_fields(scope)).exists():
            raise ValidationError(
                {"role": [f"{user.username} is already {role_label(role)} of {scope}."]}
            )
        assignment = RoleAssignment.objects.create(user=user, role=role, **_scope_fields(scope))
        audit_record(
            action=AuditAction.ROLE_GRANTED,
            organization_id=_organization_id(scope),
            actor=actor,
            object_kind="user",
            object_id=user.pk,
            object_label=f"{user.username}: {role_label(role)} of {scope_label(scope)}",
            before={},
            after={"role": role, "scope": scope_label(scope)},
            reason=reason,
        )
    return assignment


def role_revoke(*, actor, assignment: RoleAssignment, reason: str = "") -> None:
    """Take the role of ``assignment`` away from its user (the row is deleted).

    ``PermissionDenied`` when the actor may not manage that role there. Revoking the last org
    admin of an organization is a ``ValidationError`` on ``role`` (nobody could manage it
    afterwards); the organization's row lock serializes two admins revoking each other.
    Recorded in the audit trail (``role_revoked``) in the same transaction.
    """
    scope = assignment.scope
    role = assignment.role
    if not role_can_manage(visibility=user_visibility(user=actor), role=role, scope=scope):
        raise PermissionDenied(f"You may not revoke the {role_label(role)} role on {scope}.")
    reason = _reason(reason)
    organization_id = _organization_id(scope)
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization_id).first()
        fresh = RoleAssignment.objects.filter(pk=assignment.pk).select_related("user").first()
        if fresh is None:
            raise ValidationError({"role": ["This role was already revoked."]})
        if role == Role.ORG_ADMIN:
            admins = RoleAssignment.objects.filter(
                role=Role.ORG_ADMIN, organization_id=organization_id
            )
            if admins.count() <= 1:
                raise ValidationError(
                    {"role": [f"{fresh.user.username} is the last org admin of {scope}; "
                              "grant the role to someone else first."]}
                )  # fmt: skip
        fresh.delete()
        audit_record(
            action=AuditAction.ROLE_REVOKED,
            organization_id=organization_id,
            actor=actor,
            object_kind="user",
            object_id=fresh.user_id,
            object_label=f"{fresh.user.username}: {role_label(role)} of {scope_label(scope)}",
            before={"role": role, "scope": scope_label(scope)},
            after={},
            reason=reason,
        )
