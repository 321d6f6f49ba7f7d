"""Serializers of the node agent protocol: register, heartbeat, orders, their
acknowledgements and run exits."""

from __future__ import annotations

from rest_framework import serializers

from scheduler.choices import ExitOutcome
from scheduler.models import Order


class AgentRegisterSerializer(serializers.Serializer):
    """An agent announcing itself: its node name (must match its token) and GPUs."""

    node = serializers.CharField(max_length=120)
    gpus = serializers.IntegerField(min_value=1, max_value=1024)
    gpu_indices = serializers.ListField(
        child=serializers.CharField(max_length=16), required=False, max_length=1024
    )
    version = serializers.CharField(required=False, max_length=40, default="")


class AgentRegisteredSerializer(serializers.Serializer):
    """The server's answer to a registration."""

    node = serializers.CharField()
    cluster = serializers.CharField()
    state = serializers.CharField()
    heartbeat_seconds = serializers.FloatField()
    open_runs = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Runs the server believes are on this node: a fresh agent reports them lost.",
    )


class AgentHeartbeatSerializer(serializers.Serializer):
    """A heartbeat: the runs the agent's processes carry."""

    running = serializers.ListField(
        child=serializers.CharField(max_length=40), required=False, default=list, max_length=4096
    )


class AgentHeartbeatAnswerSerializer(serializers.Serializer):
    """The node's state, and runs the agent must stop (the server has ended them)."""

    state = serializers.CharField()
    stop_runs = serializers.ListField(child=serializers.IntegerField())


class OrderSerializer(serializers.ModelSerializer):
    """An order as an agent receives it: the model's fields with the payload flattened in."""

    class Meta:
        model = Order
        fields = ["id", "kind", "idempotency_key", "run", "state", "delivery_count"]
        read_only_fields = fields

    def to_representation(self, order):
        data = dict(order.payload or {})
        data.update(super().to_representation(order))
        return data


class OrderListSerializer(serializers.Serializer):
    """Orders for the agent's node, stops before starts."""

    orders = OrderSerializer(many=True)


class OrderAckSerializer(serializers.Serializer):
    """An agent's acknowledgement of an order (``status`` and ``message`` are informative)."""

    status = serializers.ChoiceField(
        choices=["started", "stopped", "rejected"], required=False, default="started"
    )
    message = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class RunExitSerializer(serializers.Serializer):
    """How a run's process ended on the agent's node."""

    outcome = serializers.ChoiceField(choices=ExitOutcome.choices)
    exit_code = serializers.IntegerField(required=False, allow_null=True, default=None)
    message = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class AgentAnswerSerializer(serializers.Serializer):
    """A short answer to an acknowledgement or exit report."""

    id = serializers.IntegerField()
    state = serializers.CharField()
