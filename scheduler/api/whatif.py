"""``POST /api/what-if/`` and ``GET /api/what-if/{id}/``: preview a split before it is made.

A proposal is the split API's body without a reason — ``parent`` (``{kind, id}``), ``cluster``
and ``shares`` (``[{node, percent}]``, some of the parent's children) — or ``request``, an
approval request whose change it previews. The answer (202) is the
run, queued or — for the same window and trees within the hour — the one already made;
``GET`` follows it to ``done``. Teams the caller may not see are summed into one row.
"""

from __future__ import annotations

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from governance.api.serializers import ParentRefSerializer, ShareInputSerializer, unique_nodes
from governance.api.views import VisibilityMixin, resolve_share_input
from scheduler.models import WhatIfRun
from scheduler.selectors.whatif import DEFAULT_DAYS, MAX_DAYS, whatif_shown
from scheduler.services.whatif import whatif_create


class WhatIfAskSerializer(serializers.Serializer):
    """What to preview: new shares of some children of ``parent`` on ``cluster`` (the split
    API's shape), or the change an approval request asks for (``request``)."""

    parent = ParentRefSerializer(required=False)
    cluster = serializers.IntegerField(min_value=1, required=False)
    shares = ShareInputSerializer(many=True, allow_empty=False, required=False)
    request = serializers.IntegerField(min_value=1, required=False)
    days = serializers.IntegerField(min_value=1, max_value=MAX_DAYS, default=DEFAULT_DAYS)

    def validate_shares(self, shares):
        return unique_nodes(shares)

    def validate(self, attrs):
        split = ("parent", "cluster", "shares")
        if "request" in attrs:
            extra = [name for name in split if name in attrs]
            if extra:
                raise serializers.ValidationError({name: "Not with request." for name in extra})
        else:
            missing = [name for name in split if name not in attrs]
            if missing:
                raise serializers.ValidationError(
                    {name: "Required unless request is given." for name in missing}
                )
        return attrs


class WhatIfView(VisibilityMixin, GenericAPIView):
    """Ask for a what-if."""

    serializer_class = WhatIfAskSerializer
    queryset = WhatIfRun.objects.all()

    @extend_schema(summary="Preview a split or an approval request's change", responses=dict)
    def post(self, request):
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        vis = self.visibility
        if "request" in data:
            asked = get_object_or_404(vis.approval_requests(), pk=data["request"])
            cluster, parent = asked.cluster, asked.parent
            percents = {line.node: line.percent for line in asked.lines.all()}
        else:
            parent, cluster, percents = resolve_share_input(vis, data, lines_field="shares")
            asked = None
        run = whatif_create(
            user=request.user,
            cluster=cluster,
            parent=parent,
            percents=percents,
            days=data["days"],
            approval_request=asked,
        )
        return Response(run_json(run, vis), status=status.HTTP_202_ACCEPTED)


class WhatIfDetailView(VisibilityMixin, GenericAPIView):
    """Follow a what-if to its figures."""

    queryset = WhatIfRun.objects.all()

    @extend_schema(summary="A what-if's progress and figures", responses=dict)
    def get(self, request, pk: int):
        vis = self.visibility
        run = get_object_or_404(WhatIfRun.objects.filter(vis.whatif_runs_q()), pk=pk)
        return Response(run_json(run, vis))


def run_json(run: WhatIfRun, vis) -> dict:
    """A run as the API answers it: state and progress, and once done the window, the
    sentence and the teams the caller sees (the rest summed)."""
    data = {
        "id": run.pk,
        "cluster": run.cluster_id,
        "parent": f"{run.parent_kind}-{run.parent_id}",
        "proposal": run.proposal,
        "request": run.approval_request_id,
        "days": run.days,
        "state": run.state,
        "progress": run.progress,
        "progress_note": run.progress_note,
        "error": run.error,
    }
    if run.result is not None:
        shown = whatif_shown(run.result, vis, run.cluster.organization_id)
        data.update(
            {
                "window": {"start": run.result["start"], "end": run.result["end"]},
                "jobs": run.result["jobs"],
                "treated": run.result["counts"],
                "summary": shown.summary,
                "teams": [asdict(t) for t in shown.teams],
                "other_teams": asdict(shown.other) if shown.other else None,
            }
        )
    return data
