"""The audit trail and role management over the API (org admins; program managers for roles).

- ``GET /api/audit-events/`` (and ``/{id}/``): the events of the organizations the caller
  administers, newest first, filtered by ``action``, ``actor`` (a username, or ``system``),
  ``since``/``until`` (days, both included), ``object_kind``, ``object_id``. Anyone else: 403.
- ``GET/POST /api/role-assignments/``: the roles the caller may manage; POST grants one
  (``{"user": "alice", "role": "pi", "scope": {"kind": "project", "id": 7}, "reason": ""}``).
  ``POST /api/role-assignments/{id}/revoke/`` takes it away. Who may: ``governance.selectors
  .roles``. Anyone who manages no role: 403; a scope the caller cannot see: 404 on ``scope.id``.
Every change is in the audit trail (``governance.services.audit``).
"""

from __future__ import annotations

import django_filters
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from governance.api.routers import ApiRouter
from governance.api.views import VisibilityMixin, resolve_visible
from governance.choices import AuditAction, Role
from governance.fields import DayFilter
from governance.models import AuditEvent, RoleAssignment
from governance.selectors.audit import (
    AuditFilter,
    audit_events_filter,
    audit_events_visible,
    audit_may_view,
)
from governance.selectors.roles import (
    role_assignments_manageable,
    role_managers_anywhere,
    scope_label,
)
from governance.services.roles import MAX_REASON_LENGTH, role_grant, role_revoke

# --- Audit events ------------------------------------------------------------------------


class AuditEventSerializer(serializers.ModelSerializer):
    """One recorded change: who (``actor``: a username, null for the system), when, what."""

    actor = serializers.CharField(source="actor_label", allow_null=True)
    organization = serializers.PrimaryKeyRelatedField(read_only=True)
    before = serializers.DictField()
    after = serializers.DictField()

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "at",
            "actor",
            "action",
            "organization",
            "object_kind",
            "object_id",
            "object_label",
            "before",
            "after",
            "reason",
        ]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["actor"] = instance.actor_label or None
        return data


class AuditEventFilter(django_filters.FilterSet):
    """The page's filters: action, actor, a range of days, one object."""

    action = django_filters.ChoiceFilter(choices=AuditAction.choices, method="_noop")
    actor = django_filters.CharFilter(
        method="_noop", max_length=150, help_text='A username, or "system".'
    )
    since = DayFilter(method="_noop", help_text="First day, included.")
    until = DayFilter(method="_noop", help_text="Last day, included.")
    object_kind = django_filters.CharFilter(method="_noop", max_length=30)
    object_id = django_filters.NumberFilter(method="_noop", min_value=0, max_value=2**63 - 1)

    class Meta:
        model = AuditEvent
        fields = ["action", "actor", "since", "until", "object_kind", "object_id"]

    def _noop(self, queryset, name, value):
        return queryset  # applied together in ``filter_queryset`` by the selector

    def filter_queryset(self, queryset):
        data = self.form.cleaned_data
        if data.get("since") and data.get("until") and data["until"] < data["since"]:
            raise DjangoValidationError({"until": ["Must be on or after the first day."]})
        object_id = data.get("object_id")
        if object_id is not None and object_id != int(object_id):
            raise DjangoValidationError({"object_id": ["Must be a whole number."]})
        return audit_events_filter(
            queryset,
            query=AuditFilter(
                action=data.get("action") or "",
                actor=data.get("actor") or "",
                since=data.get("since"),
                until=data.get("until"),
                object_kind=data.get("object_kind") or "",
                object_id=int(object_id) if object_id is not None else None,
            ),
        )


class AuditEventViewSet(VisibilityMixin, viewsets.ReadOnlyModelViewSet):
    """The audit trail of the organizations the caller administers (org admins only)."""

    queryset = AuditEvent.objects.all()
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AuditEvent.objects.none()
        if not audit_may_view(visibility=self.visibility):
            raise PermissionDenied("The audit trail is for org admins.")
        return audit_events_visible(visibility=self.visibility)


# --- Role assignments --------------------------------------------------------------------


class ScopeSerializer(serializers.Serializer):
    """A node of the tree a role is held on."""

    kind = serializers.ChoiceField(choices=["organization", "program", "project"])
    id = serializers.IntegerField(min_value=1, max_value=2**63 - 1)


class RoleAssignmentSerializer(serializers.ModelSerializer):
    """A user's role on one node of the tree."""

    user = serializers.CharField(source="user.username")
    scope = serializers.SerializerMethodField()

    class Meta:
        model = RoleAssignment
        fields = ["id", "user", "role", "scope", "created_at"]
        read_only_fields = fields

    @extend_schema(
        responses={
            "type": "object",
            "properties": {
                "kind": {"type": "string"},
                "id": {"type": "integer"},
                "name": {"type": "string"},
            },
        }
    )
    def get_scope(self, obj) -> dict:
        scope = obj.scope
        kind = "organization" if obj.organization_id else "program" if obj.program_id else "project"
        return {"kind": kind, "id": scope.pk, "name": scope_label(scope)}


class RoleGrantSerializer(serializers.Serializer):
    """Grant ``role`` on ``scope`` to the user named ``user``."""

    user = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices)
    scope = ScopeSerializer()
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_REASON_LENGTH
    )


class RoleRevokeSerializer(serializers.Serializer):
    """Why the role is taken away (optional, kept in the audit trail)."""

    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_REASON_LENGTH
    )


class RoleAssignmentViewSet(
    VisibilityMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Roles the caller may grant and revoke (org admins; program managers on their projects)."""

    queryset = RoleAssignment.objects.all()
    serializer_class = RoleAssignmentSerializer
    filterset_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return RoleAssignment.objects.none()
        if not role_managers_anywhere(visibility=self.visibility):
            raise PermissionDenied("Roles are managed by org admins and program managers.")
        return role_assignments_manageable(visibility=self.visibility)

    @extend_schema(request=RoleGrantSerializer, responses={201: RoleAssignmentSerializer})
    def create(self, request, *args, **kwargs):
        """Grant a role (recorded in the audit trail)."""
        vis = self.visibility
        if not role_managers_anywhere(visibility=vis):
            raise PermissionDenied("Roles are managed by org admins and program managers.")
        serializer = RoleGrantSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        kind = data["scope"]["kind"]
        scope = resolve_visible(
            getattr(vis, f"{kind}s")(), data["scope"]["id"], field="scope.id", what=kind
        )
        user = get_user_model().objects.filter(username=data["user"], is_active=True).first()
        if user is None:
            raise DjangoValidationError({"user": [f"No active user is called {data['user']!r}."]})
        assignment = role_grant(
            actor=request.user, user=user, role=data["role"], scope=scope, reason=data["reason"]
        )
        return Response(RoleAssignmentSerializer(assignment).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=RoleRevokeSerializer, responses={204: None})
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        """Take the role away (recorded in the audit trail)."""
        assignment = self.get_object()
        serializer = RoleRevokeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        role_revoke(
            actor=request.user, assignment=assignment, reason=serializer.validated_data["reason"]
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


router = ApiRouter()
router.register("audit-events", AuditEventViewSet, basename="auditevent")
router.register("role-assignments", RoleAssignmentViewSet, basename="roleassignment")

urlpatterns = router.urls
