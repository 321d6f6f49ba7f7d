"""``POST /api/workloads/{id}/preempt/``: an operator stops a running workload now.

Bypasses the minimum runtime (``scheduler.services.preemptions``); org admins of the
workload's organization only (403 for others who see it, 404 for those who do not); a
``reason`` is required (400 naming it); a workload that is not running is a 400 on ``state``.
The act is recorded in the audit trail.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from governance.api.views import VisibilityMixin
from scheduler.api.serializers import WorkloadDetailSerializer
from scheduler.models import Run, Workload
from scheduler.selectors.workloads import visible_workloads
from scheduler.services.preemptions import MAX_REASON_LENGTH, workload_preempt_force


class PreemptSerializer(serializers.Serializer):
    """Why the run must stop now (required; kept in the audit trail and on the run)."""

    reason = serializers.CharField(max_length=MAX_REASON_LENGTH)


class WorkloadPreemptView(VisibilityMixin, GenericAPIView):
    """Force the preemption of a running workload (operators: org admins)."""

    serializer_class = WorkloadDetailSerializer
    queryset = Workload.objects.all()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Workload.objects.none()
        return visible_workloads(self.visibility).select_related(
            "project", "cluster", "submitted_by"
        )

    @extend_schema(
        summary="Force the preemption of a running workload (minimum runtime bypassed)",
        request=PreemptSerializer,
        responses=WorkloadDetailSerializer,
    )
    def post(self, request, pk: int):
        workload = self.get_object()
        if not self.visibility.is_org_admin(workload.cluster.organization_id):
            # Before the body: a refusal by role does not depend on what was sent.
            raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
        body = PreemptSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workload_preempt_force(
            workload=workload, actor=request.user, reason=body.validated_data["reason"]
        )
        fresh = (
            self.get_queryset()
            .prefetch_related(
                Prefetch(
                    "runs",
                    queryset=Run.objects.order_by("-attempt").select_related(
                        "preempted_by__project__program"
                    ),
                )
            )
            .get(pk=workload.pk)
        )
        return Response(WorkloadDetailSerializer(fresh, context={"request": request}).data)
