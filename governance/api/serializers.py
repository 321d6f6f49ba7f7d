"""Serializers of the budget API: output shapes, and input shapes checked before services run.

Input serializers check types, ranges and required fields only; the business rules (the
100 % rule, who may do what, state transitions) are the services'.
"""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.choices import ApprovalState
from governance.fields import InstantSerializerField
from governance.models import (
    Allocation,
    ApprovalDecision,
    ApprovalLine,
    ApprovalRequest,
    Cluster,
    Organization,
    Program,
    Project,
)

# --- Output serializers --------------------------------------------------------------------


class UserSummarySerializer(serializers.ModelSerializer):
    """A person as the API shows them to colleagues: id, username and display name."""

    name = serializers.SerializerMethodField()

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "name"]

    def get_name(self, user) -> str:
        return user.get_full_name() or user.get_username()


class NodeRefSerializer(serializers.Serializer):
    """A node of the budget tree named by kind and id (and, in output, its name)."""

    kind = serializers.ChoiceField(choices=["organization", "program", "project"])
    id = serializers.IntegerField(min_value=1)
    name = serializers.CharField(read_only=True)


def node_ref(node) -> dict | None:
    """``{kind, id, name}`` of an Organization, Program or Project."""
    if node is None:
        return None
    return {"kind": node._meta.model_name, "id": node.pk, "name": node.name}


class OrganizationSerializer(serializers.ModelSerializer):
    """An organization: the root of a budget tree."""

    class Meta:
        model = Organization
        fields = ["id", "name", "slug"]


class ProgramSerializer(serializers.ModelSerializer):
    """A program of an organization."""

    class Meta:
        model = Program
        fields = ["id", "organization", "name", "slug"]


class ProjectSerializer(serializers.ModelSerializer):
    """A project: the leaf of the tree that owns workloads."""

    class Meta:
        model = Project
        fields = ["id", "program", "name", "slug", "cost_centre"]


class ClusterSerializer(serializers.ModelSerializer):
    """A cluster: nodes of one GPU type; shares are per cluster."""

    class Meta:
        model = Cluster
        fields = ["id", "organization", "name", "slug", "gpu_type", "nodes", "gpus_per_node"]


class TreeNodeSerializer(serializers.Serializer):
    """One node of a cluster's budget tree with its share and its visible children."""

    kind = serializers.CharField()
    id = serializers.IntegerField(source="obj.pk")
    name = serializers.CharField(source="obj.name")
    share = serializers.DecimalField(
        max_digits=5, decimal_places=2, help_text="Percent of the parent's share."
    )
    effective_share = serializers.DecimalField(
        max_digits=9, decimal_places=4, help_text="Percent of the whole cluster."
    )
    unallocated = serializers.DecimalField(
        max_digits=5,
        decimal_places=2,
        allow_null=True,
        help_text="Percent of this node's share not given to any child (parents only).",
    )
    gpus_entitled = serializers.FloatField()
    managers = UserSummarySerializer(many=True)
    children = serializers.SerializerMethodField()

    @extend_schema_field({"type": "array", "items": {"$ref": "#/components/schemas/TreeNode"}})
    def get_children(self, node) -> list:
        return TreeNodeSerializer(node.children, many=True, context=self.context).data


class AllocationSerializer(serializers.ModelSerializer):
    """One effective-dated share version: who set it, when, why."""

    node = serializers.SerializerMethodField()
    set_by = UserSummarySerializer(read_only=True)

    class Meta:
        model = Allocation
        fields = [
            "id",
            "cluster",
            "node",
            "program",
            "project",
            "percent",
            "valid_from",
            "valid_to",
            "set_by",
            "reason",
            "approval_request",
            "created_at",
        ]

    @extend_schema_field(NodeRefSerializer)
    def get_node(self, allocation) -> dict | None:
        return node_ref(allocation.node)


class ApprovalLineSerializer(serializers.ModelSerializer):
    """One requested change: a child node's share from ``previous_percent`` to ``percent``."""

    node = serializers.SerializerMethodField()

    class Meta:
        model = ApprovalLine
        fields = ["id", "node", "percent", "previous_percent"]

    @extend_schema_field(NodeRefSerializer)
    def get_node(self, line) -> dict | None:
        return node_ref(line.node)


@extend_schema_field(
    {
        "type": "string",
        "pattern": f"^({'|'.join(ApprovalState.values)})?$",
        "description": "A state of the request: " + ", ".join(ApprovalState.values) + ".",
    }
)
class StepStateField(serializers.CharField):
    """A state an approval request passed through in one step (empty ``from_state`` for its
    creation). Documented by a pattern, not an enum: drf-spectacular would otherwise name the
    request's states a second time (``ToStateEnum`` beside ``StateEnum``) and warn."""


class ApprovalDecisionSerializer(serializers.ModelSerializer):
    """One step of a request's history (``actor`` is empty when the system applied it)."""

    actor = UserSummarySerializer(read_only=True, allow_null=True)
    from_state = StepStateField(read_only=True)
    to_state = StepStateField(read_only=True)

    class Meta:
        model = ApprovalDecision
        fields = ["id", "actor", "action", "from_state", "to_state", "comment", "at"]


class ApprovalRequestSerializer(serializers.ModelSerializer):
    """An approval request with its lines and every decision taken on it."""

    parent = serializers.SerializerMethodField()
    requested_by = UserSummarySerializer(read_only=True)
    lines = ApprovalLineSerializer(many=True, read_only=True)
    decisions = ApprovalDecisionSerializer(many=True, read_only=True)

    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "parent",
            "organization",
            "program",
            "cluster",
            "state",
            "requested_by",
            "reason",
            "effective_from",
            "effective_to",
            "created_at",
            "updated_at",
            "lines",
            "decisions",
        ]

    @extend_schema_field(NodeRefSerializer)
    def get_parent(self, request_obj) -> dict | None:
        return node_ref(request_obj.parent)


# --- Input serializers ---------------------------------------------------------------------


class ParentRefSerializer(serializers.Serializer):
    """The parent whose children's shares change: an organization or a program."""

    kind = serializers.ChoiceField(choices=["organization", "program"])
    id = serializers.IntegerField(min_value=1)


class ShareInputSerializer(serializers.Serializer):
    """A child node's id and its new percent of the parent's share (0 to 100, two decimals)."""

    node = serializers.IntegerField(min_value=1, help_text="Id of a child program or project.")
    percent = serializers.DecimalField(
        max_digits=5, decimal_places=2, min_value=Decimal("0"), max_value=Decimal("100")
    )


def unique_nodes(shares: list[dict]) -> list[dict]:
    """``shares`` unless a node is listed twice (a ``ValidationError`` naming it)."""
    seen = set()
    for item in shares:
        if item["node"] in seen:
            raise serializers.ValidationError(f"Node {item['node']} is listed more than once.")
        seen.add(item["node"])
    return shares


class SplitInputSerializer(serializers.Serializer):
    """Set the shares of some or all children of ``parent`` on ``cluster`` directly."""

    parent = ParentRefSerializer()
    cluster = serializers.IntegerField(min_value=1)
    shares = ShareInputSerializer(many=True, allow_empty=False)
    reason = serializers.CharField(max_length=2000)
    valid_from = InstantSerializerField(required=False, allow_null=True)
    valid_to = InstantSerializerField(required=False, allow_null=True)

    def validate_shares(self, shares):
        return unique_nodes(shares)


class ApprovalRequestInputSerializer(serializers.Serializer):
    """Request a change of shares among the children of ``parent`` on ``cluster``."""

    parent = ParentRefSerializer()
    cluster = serializers.IntegerField(min_value=1)
    lines = ShareInputSerializer(many=True, allow_empty=False)
    reason = serializers.CharField(max_length=2000)
    effective_from = InstantSerializerField(required=False, allow_null=True)
    effective_to = InstantSerializerField(required=False, allow_null=True)
    submit = serializers.BooleanField(
        default=True, help_text="Submit at once (default) or keep as a draft."
    )

    def validate_lines(self, lines):
        return unique_nodes(lines)


class DecisionInputSerializer(serializers.Serializer):
    """A comment that goes with a decision (required by the service when rejecting)."""

    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class TreeQuerySerializer(serializers.Serializer):
    """Query parameters of the tree: the instant to show (default now)."""

    at = InstantSerializerField(required=False)


class HistoryQuerySerializer(serializers.Serializer):
    """Query parameters of a node's history: optionally one cluster."""

    cluster = serializers.IntegerField(required=False, min_value=1)
