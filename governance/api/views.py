"""Viewsets of the budget API: thin over the visibility selector, selectors and services.

Querysets start from ``user_visibility(user=...)``, so an object the caller may not see is a
404 exactly like one that does not exist. ``PermissionDenied`` from a service is a 403 and its
``ValidationError`` a 400 naming the field (``governance.api_errors``).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from governance import filters
from governance.api.parsers import LimitedFormParser, LimitedJSONParser
from governance.api.serializers import (
    AllocationSerializer,
    ApprovalRequestInputSerializer,
    ApprovalRequestSerializer,
    ClusterSerializer,
    DecisionInputSerializer,
    HistoryQuerySerializer,
    OrganizationSerializer,
    ProgramSerializer,
    ProjectSerializer,
    SplitInputSerializer,
    TreeNodeSerializer,
    TreeQuerySerializer,
)
from governance.models import Allocation, ApprovalRequest, Cluster, Organization, Program, Project
from governance.selectors.tree import allocation_history, tree_for
from governance.services.allocations import allocation_split
from governance.services.approvals import (
    approval_approve,
    approval_reject,
    approval_request_create,
    approval_submit,
    approval_withdraw,
)
from governance.services.lockout import lockout_clear, lockout_failure, lockout_wait

# --- Input parsing ------------------------------------------------------------------------


class TokenView(ObtainAuthToken):
    """Exchange a username and password (JSON or form) for the caller's API token.

    Failed attempts are counted per account and per client address
    (``governance.services.lockout``); past the limit every attempt is a 429 with
    ``Retry-After``, the right password included, until the window passes.
    """

    parser_classes = [LimitedJSONParser, LimitedFormParser]

    def post(self, request, *args, **kwargs):
        account = str(request.data.get("username", ""))[:150]
        address = request.META.get("REMOTE_ADDR", "")
        wait = lockout_wait(account=account, address=address)
        if wait:
            return Response(
                {"detail": f"Too many failed sign-ins. Try again in {wait} s."},
                status=status.HTTP_429_TOO_MANY_REQUESTS,
                headers={"Retry-After": str(wait)},
            )
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            if account and request.data.get("password"):
                lockout_failure(account=account, address=address)
            raise ValidationError(serializer.errors)
        lockout_clear(account=account)
        token, _ = Token.objects.get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key})


# --- Resolving ids through the caller's visibility -----------------------------------------


def _not_found(field: str, what: str, pk) -> NotFound:
    """A 404 naming the field; the same words whether the object is missing or hidden."""
    return NotFound({field: [f"No {what} with id {pk}."]})


def resolve_visible(queryset, pk, *, field: str, what: str):
    """The object ``pk`` of ``queryset`` (already scoped to the caller) or a 404 on ``field``."""
    obj = queryset.filter(pk=pk).first()
    if obj is None:
        raise _not_found(field, what, pk)
    return obj


def resolve_share_input(vis, data: dict, *, lines_field: str, must_manage: bool = False) -> tuple:
    """Turn validated ``parent``/``cluster``/``lines`` ids into visible objects.

    Returns ``(parent, cluster, {child: percent})``. Unknown or hidden ids are 404s naming the
    field; a visible node that is not a child of ``parent`` is a 400 naming it. With
    ``must_manage`` a caller who sees the parent but may not manage it gets the service's 403
    at once, rather than a 404 about a sibling they were never meant to see.
    """
    parent_ref = data["parent"]
    if parent_ref["kind"] == "organization":
        parent = resolve_visible(
            vis.organizations(), parent_ref["id"], field="parent.id", what="organization"
        )
        children, child_kind = vis.programs(), "program"
    else:
        parent = resolve_visible(
            vis.programs(), parent_ref["id"], field="parent.id", what="program"
        )
        children, child_kind = vis.projects(), "project"
    if must_manage and not vis.can_manage(parent):
        raise PermissionDenied(f"Only a manager of {parent} may split it.")
    cluster = resolve_visible(vis.clusters(), data["cluster"], field="cluster", what="cluster")
    percents = {}
    for index, item in enumerate(data[lines_field]):
        field = f"{lines_field}[{index}].node"
        child = resolve_visible(children, item["node"], field=field, what=child_kind)
        parent_id = child.organization_id if child_kind == "program" else child.program_id
        if parent_id != parent.pk:
            raise DjangoValidationError(
                {field: [f"{child_kind.capitalize()} {child.pk} is not a child of {parent}."]}
            )
        percents[child] = item["percent"]
    return parent, cluster, percents


# --- Viewsets ------------------------------------------------------------------------------


class VisibilityMixin:
    """Gives a viewset the caller's visibility (computed once per request) and the API's
    only parser, JSON with a size limit (any other content type is a 415)."""

    parser_classes = [LimitedJSONParser]

    @property
    def visibility(self):
        return filters.visibility_of(self.request)

    def visible(self, kind: str):
        """The caller's visible queryset of ``kind``; nothing while the schema is generated."""
        if getattr(self, "swagger_fake_view", False):
            return self.queryset.none()
        return getattr(self.visibility, kind)()


class OrganizationViewSet(VisibilityMixin, viewsets.ReadOnlyModelViewSet):
    """Organizations the caller belongs to."""

    queryset = Organization.objects.all()
    serializer_class = OrganizationSerializer

    def get_queryset(self):
        return self.visible("organizations")


def _history_response(viewset, node):
    query = HistoryQuerySerializer(data=viewset.request.query_params)
    query.is_valid(raise_exception=True)
    cluster = None
    if "cluster" in query.validated_data:
        cluster = resolve_visible(
            viewset.visibility.clusters(),
            query.validated_data["cluster"],
            field="cluster",
            what="cluster",
        )
    rows = allocation_history(node=node, cluster=cluster).filter(
        pk__in=viewset.visibility.allocations().values("pk")
    )
    rows = rows.select_related("set_by", "program", "project")
    page = viewset.paginate_queryset(rows)
    data = AllocationSerializer(page, many=True, context=viewset.get_serializer_context()).data
    return viewset.get_paginated_response(data)


_HISTORY_SCHEMA = extend_schema(
    summary="A node's allocation history, newest first",
    parameters=[HistoryQuerySerializer],
    responses=AllocationSerializer(many=True),
)


class ProgramViewSet(VisibilityMixin, viewsets.ReadOnlyModelViewSet):
    """Programs the caller may see; ``history`` lists every share version of one."""

    queryset = Program.objects.all()
    serializer_class = ProgramSerializer
    filterset_class = filters.ProgramFilter

    def get_queryset(self):
        return self.visible("programs")

    @_HISTORY_SCHEMA
    @action(detail=True, methods=["get"], filterset_class=None)
    def history(self, request, pk=None):
        """Every share version of this node, newest first (optionally on one ``cluster``)."""
        return _history_response(self, self.get_object())


class ProjectViewSet(VisibilityMixin, viewsets.ReadOnlyModelViewSet):
    """Projects the caller may see; ``history`` lists every share version of one."""

    queryset = Project.objects.all()
    serializer_class = ProjectSerializer
    filterset_class = filters.ProjectFilter

    def get_queryset(self):
        return self.visible("projects")

    @_HISTORY_SCHEMA
    @action(detail=True, methods=["get"], filterset_class=None)
    def history(self, request, pk=None):
        """Every share version of this node, newest first (optionally on one ``cluster``)."""
        return _history_response(self, self.get_object())


class ClusterViewSet(VisibilityMixin, viewsets.ReadOnlyModelViewSet):
    """Clusters the caller may see; ``tree`` shows the budget tree on one of them."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    filterset_class = filters.ClusterFilter

    def get_queryset(self):
        return self.visible("clusters")

    @extend_schema(
        summary="The budget tree on this cluster (the part the caller may see)",
        parameters=[TreeQuerySerializer],
        responses=TreeNodeSerializer,
    )
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def tree(self, request, pk=None):
        """Shares, effective shares, unallocated rest and managers per node, as of ``at``."""
        cluster = self.get_object()
        query = TreeQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        root = tree_for(
            visibility=self.visibility, cluster=cluster, at=query.validated_data.get("at")
        )
        return Response(TreeNodeSerializer(root, context=self.get_serializer_context()).data)


class AllocationViewSet(VisibilityMixin, viewsets.ReadOnlyModelViewSet):
    """Allocation versions the caller may see, filterable by cluster, program and project."""

    queryset = Allocation.objects.all()
    serializer_class = AllocationSerializer
    filterset_class = filters.AllocationFilter

    def get_queryset(self):
        return self.visible("allocations").select_related("set_by", "program", "project")


class SplitViewSet(VisibilityMixin, viewsets.GenericViewSet):
    """Set a split: a manager gives children of a node their shares on a cluster directly."""

    queryset = Allocation.objects.none()
    serializer_class = SplitInputSerializer
    filterset_class = None
    pagination_class = None

    @extend_schema(
        summary="Set the shares of children of an organization or program",
        request=SplitInputSerializer,
        responses={201: AllocationSerializer(many=True)},
    )
    def create(self, request):
        serializer = SplitInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        parent, cluster, percents = resolve_share_input(
            self.visibility, data, lines_field="shares", must_manage=True
        )
        rows = allocation_split(
            actor=request.user,
            parent=parent,
            cluster=cluster,
            percents=percents,
            reason=data["reason"],
            valid_from=data.get("valid_from"),
            valid_to=data.get("valid_to"),
        )
        out = AllocationSerializer(rows, many=True, context=self.get_serializer_context())
        return Response(out.data, status=status.HTTP_201_CREATED)


_DECISION_SCHEMA = extend_schema(
    request=DecisionInputSerializer, responses=ApprovalRequestSerializer
)


class ApprovalRequestViewSet(
    VisibilityMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Approval requests: list (``box=mine`` or ``box=inbox``), detail, create, and the
    transitions submit, approve, reject and withdraw."""

    queryset = ApprovalRequest.objects.all()
    serializer_class = ApprovalRequestSerializer
    filterset_class = filters.ApprovalRequestFilter

    def get_queryset(self):
        return (
            self.visible("approval_requests")
            .select_related("organization", "program", "cluster", "requested_by")
            .prefetch_related(
                "lines__program",
                "lines__project",
                "decisions__actor",
            )
        )

    def _detail(self, approval_request, code=status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=approval_request.pk)
        return Response(self.get_serializer(fresh).data, status=code)

    @extend_schema(
        request=ApprovalRequestInputSerializer, responses={201: ApprovalRequestSerializer}
    )
    def create(self, request):
        serializer = ApprovalRequestInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        parent, cluster, percents = resolve_share_input(self.visibility, data, lines_field="lines")
        created = approval_request_create(
            actor=request.user,
            parent=parent,
            cluster=cluster,
            percents=percents,
            reason=data["reason"],
            effective_from=data.get("effective_from"),
            effective_to=data.get("effective_to"),
            submit=data["submit"],
        )
        return self._detail(created, status.HTTP_201_CREATED)

    def _decide(self, service, *, comment_kw: bool = True) -> Response:
        approval_request = self.get_object()
        serializer = DecisionInputSerializer(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        kwargs = {"comment": serializer.validated_data["comment"]} if comment_kw else {}
        service(actor=self.request.user, approval_request=approval_request, **kwargs)
        return self._detail(approval_request)

    @extend_schema(request=None, responses=ApprovalRequestSerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        """Submit a draft for decision."""
        return self._decide(approval_submit, comment_kw=False)

    @_DECISION_SCHEMA
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve a submitted request; it applies at its effective date."""
        return self._decide(approval_approve)

    @_DECISION_SCHEMA
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Reject a submitted request, saying why."""
        return self._decide(approval_reject)

    @_DECISION_SCHEMA
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        """Withdraw your own request before it is decided."""
        return self._decide(approval_withdraw)
