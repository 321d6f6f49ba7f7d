"""The instructions the scheduler leaves for node agents: start or stop one run on one node."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from scheduler.choices import OrderKind, OrderState
from scheduler.models.nodes import Node
from scheduler.models.workloads import Run


class Order(models.Model):
    """An instruction for the agent of one node: start or stop one run there.

    ``idempotency_key`` is ``"<kind>:<run id>:<node id>"``: the same decision can never be
    written twice, and an agent uses it to ignore an order it has already carried out.
    ``payload`` carries what the agent needs (workload id, launch spec, GPUs, grace seconds).
    """

    kind = models.CharField(max_length=10, choices=OrderKind.choices)
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="orders")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="orders")
    state = models.CharField(max_length=20, choices=OrderState.choices, default=OrderState.CREATED)
    idempotency_key = models.CharField(max_length=100, unique=True)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    delivery_count = models.PositiveIntegerField(default=0)
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=OrderKind.values), name="order_kind_valid"),
            models.CheckConstraint(
                condition=Q(state__in=OrderState.values), name="order_state_valid"
            ),
        ]
        indexes = [
            # An agent fetching its node's open orders.
            models.Index(
                fields=["node", "created_at"],
                condition=Q(state__in=["created", "delivered"]),
                name="order_open_by_node",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.run_id} on {self.node_id} ({self.state})"
