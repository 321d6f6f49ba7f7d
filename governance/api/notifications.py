"""``/api/notifications/``: the caller's notifications, and marking them read.

``GET`` lists them newest first (``?kind=``, ``?unread=true``); ``POST …/{id}/read/`` marks
one read, ``POST …/read-all/`` all of them; ``GET``/``PUT …/preferences/`` the e-mail choice
per kind. Nobody sees or marks another person's.
"""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from governance.api.views import VisibilityMixin
from governance.choices import EmailChoice, NotificationKind
from governance.filters import StrictBooleanFilter
from governance.models import Notification
from governance.selectors.notifications import notifications_for
from governance.services.notification_mail import notification_prefs, notification_prefs_set
from governance.services.notifications import notifications_mark_read


class NotificationSerializer(serializers.ModelSerializer):
    """One notification: what happened, where to look, how many events it folds, read or not."""

    class Meta:
        model = Notification
        fields = ["id", "kind", "title", "body", "link", "count", "created_at", "updated_at",
                  "read_at"]  # fmt: skip
        read_only_fields = fields


class MarkedSerializer(serializers.Serializer):
    """How many notifications changed to read."""

    marked = serializers.IntegerField()


class PreferencesSerializer(serializers.Serializer):
    """The caller's e-mail choice per kind: ``off``, ``immediate`` or ``daily`` (a digest).
    A PUT may name some kinds only; the others keep their choice."""

    def get_fields(self):
        return {
            kind: serializers.ChoiceField(
                choices=EmailChoice.choices, required=False, help_text=label
            )
            for kind, label in NotificationKind.choices
        }


class NotificationFilter(django_filters.FilterSet):
    """``kind`` (one of the kinds) and ``unread`` (true: only unread)."""

    kind = django_filters.ChoiceFilter(choices=NotificationKind.choices)
    unread = StrictBooleanFilter(method="only_unread")

    class Meta:
        model = Notification
        fields = ["kind", "unread"]

    def only_unread(self, queryset, name, value):
        return queryset.filter(read_at__isnull=True) if value else queryset


class NotificationViewSet(VisibilityMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """The caller's notifications, newest first."""

    queryset = Notification.objects.all()
    serializer_class = NotificationSerializer
    filterset_class = NotificationFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Notification.objects.none()
        return notifications_for(user=self.request.user)

    @extend_schema(summary="Mark one notification read", request=None, responses=MarkedSerializer)
    @action(detail=True, methods=["post"], filterset_class=None)
    def read(self, request, pk=None):
        """Mark it read (a 404 when it is not the caller's)."""
        row = self.get_object()
        return Response({"marked": notifications_mark_read(user=request.user, ids=[row.pk])})

    @extend_schema(
        methods=["GET"], summary="Your e-mail choice per kind", responses=PreferencesSerializer
    )
    @extend_schema(
        methods=["PUT"],
        summary="Change your e-mail choice of some kinds",
        request=PreferencesSerializer,
        responses=PreferencesSerializer,
    )
    @action(
        detail=False,
        methods=["get", "put"],
        url_path="preferences",
        filterset_class=None,
        pagination_class=None,
    )
    def preferences(self, request):
        """GET: every kind with your choice (defaults filled in). PUT: change the kinds named."""
        if request.method == "PUT":
            serializer = PreferencesSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            notification_prefs_set(user=request.user, choices=serializer.validated_data)
        return Response(notification_prefs(user=request.user))

    @extend_schema(summary="Mark all notifications read", request=None, responses=MarkedSerializer)
    @action(detail=False, methods=["post"], url_path="read-all", filterset_class=None)
    def read_all(self, request):
        """Mark every unread notification of the caller read."""
        return Response({"marked": notifications_mark_read(user=request.user)})
