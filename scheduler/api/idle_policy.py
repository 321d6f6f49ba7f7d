"""``GET/PUT /api/clusters/{id}/idle-policy/``: a cluster's idle-allocation rule.

Anyone who sees the cluster may read the rule that applies to their runs (the defaults when
none was set); only an org admin of the cluster's organization may change it (403 for others
who see it, 404 for those who do not; 400 naming the field for a bad value).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from drf_spectacular.utils import extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from governance.api.views import VisibilityMixin
from governance.models import Cluster
from scheduler.api.serializers import IdlePolicySerializer
from scheduler.selectors.utilization import idle_policy_effective
from scheduler.services.idle_rule import idle_policy_set


class IdlePolicyView(VisibilityMixin, GenericAPIView):
    """Read or set the idle rule of a cluster."""

    serializer_class = IdlePolicySerializer
    queryset = Cluster.objects.all()

    def get_queryset(self):
        return self.visible("clusters")

    def _answer(self, cluster: Cluster) -> Response:
        rule = idle_policy_effective(cluster=cluster)
        data = {
            "cluster": cluster.pk,
            "enabled": rule.enabled,
            "busy_below_percent": rule.busy_below_percent,
            "for_minutes": rule.for_minutes,
            "is_default": rule.is_default,
            "updated_at": rule.updated_at,
        }
        return Response(IdlePolicySerializer(data).data)

    @extend_schema(
        summary="The idle rule that applies on a cluster", responses=IdlePolicySerializer
    )
    def get(self, request, pk: int):
        return self._answer(self.get_object())

    @extend_schema(
        summary="Set a cluster's idle rule (org admins)",
        request=IdlePolicySerializer,
        responses=IdlePolicySerializer,
    )
    def put(self, request, pk: int):
        cluster = self.get_object()
        if not self.visibility.is_org_admin(cluster.organization_id):
            # Before the body: a refusal by role does not depend on what was sent.
            raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
        body = IdlePolicySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        idle_policy_set(
            user=request.user,
            cluster=cluster,
            enabled=data["enabled"],
            busy_below_percent=data["busy_below_percent"],
            for_minutes=data["for_minutes"],
        )
        return self._answer(cluster)
