"""User endpoints of the scheduler API: workloads, nodes (operator actions), agent tokens.

Thin over the visibility selector and the scheduler's services. A workload is visible when
its project is (researchers see their projects' workloads); a node when its cluster is.
Objects the caller cannot see are 404s, exactly like missing ones; visible objects the caller
may not act on are 403s. Service ``ValidationError``s are 400s naming the field.
"""

from __future__ import annotations

import django_filters
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.response import Response

from governance.api.views import VisibilityMixin, resolve_visible
from governance.api_errors import batch_items
from governance.filters import StrictBooleanFilter
from governance.models import Cluster, Project
from governance.parsing import whole_number
from scheduler.api.serializers import (
    NodeActionSerializer,
    NodeAgentCreatedSerializer,
    NodeAgentCreateSerializer,
    NodeAgentSerializer,
    NodeSerializer,
    WorkloadBulkResultSerializer,
    WorkloadBulkSubmitSerializer,
    WorkloadDetailSerializer,
    WorkloadSerializer,
    WorkloadSubmitSerializer,
)
from scheduler.choices import NodeState, WorkloadState
from scheduler.models import Node, NodeAgent, Run, Workload
from scheduler.selectors.workloads import (
    may_cancel,
    nodes_with_usage,
    visible_workloads_with_runs,
)
from scheduler.services.executor_reports import node_agent_create
from scheduler.services.nodes import node_bring_up, node_drain, node_mark_down, node_undrain
from scheduler.services.workloads import (
    MAX_BULK_WORKLOADS,
    workload_cancel,
    workload_submit,
    workload_submit_many,
    workload_sweep_errors,
)

# --- Visibility helpers -----------------------------------------------------------------------


def validated(serializer_class, request) -> dict:
    """The request body checked by ``serializer_class`` (a 400 naming each bad field)."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def member_project(vis, ref: str) -> Project:
    """A project the caller belongs to (PI or researcher), by id or slug; else a 400 on it.

    The same words whether the project does not exist, is hidden, or is only visible (an
    org admin or finance reader does not submit on a project's behalf).
    """
    mine = vis.submit_projects().select_related("program__organization")
    pk = whole_number(ref)
    matches = list(mine.filter(pk=pk) if pk is not None else mine.filter(slug=ref)[:2])
    if len(matches) > 1:
        raise DjangoValidationError(
            {"project": [f"More than one of your projects is called {ref!r}; give its id."]}
        )
    if not matches:
        raise DjangoValidationError({"project": [f"No project you belong to is {ref!r}."]})
    return matches[0]


def project_cluster(project: Project, ref: str | None) -> Cluster:
    """The cluster to run on: ``ref`` (id or slug) among the project's organization's
    clusters, or that organization's only cluster when ``ref`` is not given."""
    clusters = Cluster.objects.filter(organization_id=project.program.organization_id)
    if ref is None:
        found = list(clusters[:2])
        if len(found) == 1:
            return found[0]
        raise DjangoValidationError(
            {"cluster": ["Name a cluster: this project's organization has several."]}
            if found
            else {"cluster": ["This project's organization has no cluster."]}
        )
    pk = whole_number(ref)
    cluster = (clusters.filter(pk=pk) if pk is not None else clusters.filter(slug=ref)).first()
    if cluster is None:
        raise DjangoValidationError(
            {"cluster": [f"No cluster {ref!r} in {project.program.organization}."]}
        )
    return cluster


# --- Workloads --------------------------------------------------------------------------------


class WorkloadFilter(django_filters.FilterSet):
    """Workloads by state, project, cluster, or only the caller's own (``mine=true``)."""

    state = django_filters.MultipleChoiceFilter(choices=WorkloadState.choices)
    project = django_filters.NumberFilter(field_name="project_id")
    cluster = django_filters.NumberFilter(field_name="cluster_id")
    mine = StrictBooleanFilter(method="filter_mine")

    class Meta:
        model = Workload
        fields = ["state", "project", "cluster", "mine"]

    def filter_mine(self, queryset, name, value):
        if value is None:
            return queryset
        user_id = getattr(self.request.user, "pk", None)
        return (
            queryset.filter(submitted_by_id=user_id)
            if value
            else queryset.exclude(submitted_by_id=user_id)
        )


class WorkloadViewSet(
    VisibilityMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Workloads: submit to a project you belong to, cancel, list and detail.

    Each workload shows its state, its position in the fair-share order (1 = next; pending
    only) and the engine's reason, as of the latest scheduling cycle; the detail adds its
    runs, newest first: where it ran, and why each run ended (preempted by whom, drained…).
    """

    queryset = Workload.objects.all()
    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Workload.objects.none()
        return visible_workloads_with_runs(self.visibility)

    def get_serializer_class(self):
        return WorkloadDetailSerializer if self.action == "retrieve" else WorkloadSerializer

    @extend_schema(
        summary="Submit a workload",
        request=WorkloadSubmitSerializer,
        responses={201: WorkloadDetailSerializer},
    )
    def create(self, request):
        data = validated(WorkloadSubmitSerializer, request)
        project = member_project(self.visibility, data["project"])
        cluster = project_cluster(project, data.get("cluster"))
        workload = workload_submit(
            project=project,
            cluster=cluster,
            name=data.get("name") or _default_name(data["launch_spec"]),
            gpus=data["gpus"],
            nodes=data["nodes"],
            min_runtime_seconds=data["min_runtime_seconds"],
            resumable=data["resumable"],
            priority=data["priority"],
            launch_spec=data["launch_spec"],
            declared_duration_seconds=data.get("declared_duration_seconds"),
            submitted_by=request.user,
        )
        # A new workload has no runs: answer from memory, without reading it back (submit
        # is the hottest endpoint; see tests/bench/test_bench_submit_load.py).
        workload._prefetched_objects_cache = {"runs": Run.objects.none()}
        data = WorkloadDetailSerializer(workload, context={"request": request}).data
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Submit a sweep: up to 1,000 workloads in one call, all or none",
        request=WorkloadBulkSubmitSerializer,
        responses={201: WorkloadBulkResultSerializer},
    )
    @action(detail=False, methods=["post"])
    def bulk(self, request):
        """Every workload is checked first (each bad one named by index, as
        ``workloads[3].gpus``); then all are stored in one transaction and one scheduling
        cycle per cluster is queued. Nothing is stored when any is refused."""
        created = sweep_submit(vis=self.visibility, data=request.data, user=request.user)
        return Response(
            {"count": len(created), "ids": [w.pk for w in created]},
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(summary="Cancel a workload", request=None, responses=WorkloadDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel: pending at once; running is stopped (its run ends when the agent confirms).

        Yours, or any in a project you lead, or any in an organization you administer.
        Cancelling a finished workload changes nothing.
        """
        workload = self.get_object()
        if not may_cancel(self.visibility, workload):
            raise PermissionDenied("You may cancel only your own workloads.")
        workload_cancel(workload=workload, actor=request.user)
        return self._detail(workload)

    def _detail(self, workload, code=status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=workload.pk)
        data = WorkloadDetailSerializer(fresh, context={"request": self.request}).data
        return Response(data, status=code)


def sweep_submit(*, vis, data, user) -> list[Workload]:
    """Read, check and store a sweep (``WorkloadBulkSubmitSerializer``'s shape) for ``user``:
    the API's bulk submit and the submit page's file upload.

    Raises DRF's ``ValidationError`` naming every bad item by index (``workloads[3].gpus``):
    malformed, on a project the user does not belong to, or more than the cluster can run.
    Nothing is stored unless every item is good.
    """
    parsed, errors = batch_items(data, "workloads", WorkloadSubmitSerializer, MAX_BULK_WORKLOADS)
    resolved: dict[tuple, tuple[Project, Cluster] | DjangoValidationError] = {}
    items = []
    for index, fields in parsed:
        key = (fields["project"], fields.get("cluster"))
        if key not in resolved:  # a sweep names the same project hundreds of times
            try:
                project = member_project(vis, fields["project"])
                resolved[key] = (project, project_cluster(project, fields.get("cluster")))
            except DjangoValidationError as exc:
                resolved[key] = exc
        where = resolved[key]
        if isinstance(where, DjangoValidationError):
            for field, messages in where.message_dict.items():
                errors[f"workloads[{index}].{field}"] = messages
            continue
        item = {**fields, "project": where[0], "cluster": where[1]}
        item["name"] = fields.get("name") or _default_name(fields["launch_spec"])
        items.append((index, item))
    if errors:  # name every bad item, not only those whose project was unknown
        errors.update(workload_sweep_errors(items))
        raise DRFValidationError(dict(sorted(errors.items(), key=_by_index)))
    return workload_submit_many(items=[item for _, item in items], submitted_by=user)


def _by_index(entry: tuple[str, list]) -> tuple[int, str]:
    """Sort key of a sweep's error: the item's index, then the field."""
    key = entry[0]
    return int(key[key.index("[") + 1 : key.index("]")]), key


def _default_name(launch_spec: dict) -> str:
    command = launch_spec.get("command") or launch_spec.get("image") or "workload"
    text = " ".join(command) if isinstance(command, list) else str(command)
    return text[:200] or "workload"


# --- Nodes ------------------------------------------------------------------------------------


class NodeFilter(django_filters.FilterSet):
    """Nodes by cluster and state."""

    cluster = django_filters.NumberFilter(field_name="cluster_id")
    state = django_filters.MultipleChoiceFilter(choices=NodeState.choices)

    class Meta:
        model = Node
        fields = ["cluster", "state"]


_NODE_ACTION = extend_schema(request=NodeActionSerializer, responses=NodeSerializer)


class NodeViewSet(VisibilityMixin, viewsets.ReadOnlyModelViewSet):
    """Nodes of the clusters the caller sees; org admins drain, undrain, mark down, bring up.

    A drain needs no more action: the node takes nothing new, each workload on it is evicted
    once it passes its minimum runtime, and the node reports ``drained`` when empty.
    """

    queryset = Node.objects.all()
    serializer_class = NodeSerializer
    filterset_class = NodeFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Node.objects.none()
        return nodes_with_usage(Node.objects.filter(cluster__in=self.visibility.clusters()))

    def _operate(self, service, *, with_reason: bool) -> Response:
        node = self.get_object()
        if not self.visibility.is_org_admin(node.cluster.organization_id):
            raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
        kwargs = {}
        if with_reason:
            kwargs["reason"] = validated(NodeActionSerializer, self.request)["reason"]
        service(node=node, actor=self.request.user, **kwargs)
        return Response(self.get_serializer(self.get_queryset().get(pk=node.pk)).data)

    @_NODE_ACTION
    @action(detail=True, methods=["post"])
    def drain(self, request, pk=None):
        """Drain: nothing new lands here; workloads leave as they pass their minimum runtime."""
        return self._operate(node_drain, with_reason=True)

    @extend_schema(request=None, responses=NodeSerializer)
    @action(detail=True, methods=["post"])
    def undrain(self, request, pk=None):
        """Return a draining or drained node to service."""
        return self._operate(node_undrain, with_reason=False)

    @_NODE_ACTION
    @action(detail=True, methods=["post"], url_path="mark-down")
    def mark_down(self, request, pk=None):
        """Take the node out now: its runs end and their workloads are requeued."""
        return self._operate(node_mark_down, with_reason=True)

    @extend_schema(request=None, responses=NodeSerializer)
    @action(detail=True, methods=["post"], url_path="bring-up")
    def bring_up(self, request, pk=None):
        """Return a node an operator marked down to service."""
        return self._operate(node_bring_up, with_reason=False)


# --- Agent tokens -----------------------------------------------------------------------------


class NodeAgentViewSet(
    VisibilityMixin,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Agent credentials of the clusters the caller administers; creating one shows its token
    once (only a digest is kept)."""

    queryset = NodeAgent.objects.all()
    serializer_class = NodeAgentSerializer
    filterset_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return NodeAgent.objects.none()
        return NodeAgent.objects.filter(
            cluster__organization_id__in=self.visibility.admin_org_ids, revoked_at__isnull=True
        )

    @extend_schema(
        summary="Create an agent token for a node",
        request=NodeAgentCreateSerializer,
        responses={201: NodeAgentCreatedSerializer},
    )
    def create(self, request):
        data = validated(NodeAgentCreateSerializer, request)
        cluster = resolve_visible(
            self.visibility.clusters(), data["cluster"], field="cluster", what="cluster"
        )
        if not self.visibility.is_org_admin(cluster.organization_id):
            raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
        if NodeAgent.objects.filter(cluster=cluster, name=data["name"]).exists():
            raise DjangoValidationError(
                {"name": [f"{cluster.name} already has an agent for node {data['name']}."]}
            )
        agent, raw = node_agent_create(cluster=cluster, name=data["name"], created_by=request.user)
        agent.token = raw
        return Response(NodeAgentCreatedSerializer(agent).data, status=status.HTTP_201_CREATED)
