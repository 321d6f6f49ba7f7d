"""Serializers of nodes and of node agents' credentials (a token is shown once, when made)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduler.api.serializers.refs import RefSerializer, object_ref
from scheduler.models import Node, NodeAgent


class NodeSerializer(serializers.ModelSerializer):
    """A node with its state, who set it, and the GPUs its open runs hold."""

    cluster = serializers.SerializerMethodField()
    gpus_in_use = serializers.IntegerField(read_only=True)
    running = serializers.IntegerField(read_only=True, help_text="Open runs on this node.")

    class Meta:
        model = Node
        fields = [
            "id",
            "cluster",
            "name",
            "gpus",
            "gpus_in_use",
            "running",
            "state",
            "state_source",
            "state_reason",
            "state_changed_at",
            "last_heartbeat",
        ]
        read_only_fields = fields

    @extend_schema_field(RefSerializer)
    def get_cluster(self, node) -> dict:
        return object_ref(node.cluster)


class NodeActionSerializer(serializers.Serializer):
    """An operator's reason for a drain or a mark-down (kept with the node's state)."""

    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class NodeAgentSerializer(serializers.ModelSerializer):
    """An agent's credentials as listed: never the token itself, only its prefix."""

    cluster = serializers.PrimaryKeyRelatedField(read_only=True)
    # No node until the agent registers (the schema said "integer"; found by the API fuzzer).
    node = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)

    class Meta:
        model = NodeAgent
        fields = ["id", "cluster", "name", "node", "token_prefix", "created_at", "last_seen_at"]
        read_only_fields = fields


class NodeAgentCreatedSerializer(NodeAgentSerializer):
    """A new agent with its token: shown this once, stored only as a digest."""

    token = serializers.CharField(read_only=True)

    class Meta(NodeAgentSerializer.Meta):
        fields = [*NodeAgentSerializer.Meta.fields, "token"]
        read_only_fields = fields


class NodeAgentCreateSerializer(serializers.Serializer):
    """Create an agent token for the node ``name`` of ``cluster``."""

    cluster = serializers.IntegerField(min_value=1)
    name = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        max_length=120,
        help_text="The node name the agent will register as.",
    )
