"""The machines of a cluster (``Node``) and the credentials of the agents that act for them
(``NodeAgent``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from scheduler.choices import NodeState, NodeStateSource


class Node(models.Model):
    """One machine of a cluster with ``gpus`` GPUs; an agent heartbeats on its behalf.

    ``state`` mirrors the engine's node states. ``state_source`` records who set it: a
    heartbeat brings back a node the system marked down, never one an operator marked down.
    """

    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=120)
    gpus = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=NodeState.choices, default=NodeState.HEALTHY)
    state_source = models.CharField(
        max_length=20, choices=NodeStateSource.choices, default=NodeStateSource.SYSTEM
    )
    state_reason = models.TextField(blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    state_changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="node_name_unique_in_cluster"),
            models.CheckConstraint(
                condition=Q(state__in=NodeState.values), name="node_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(state_source__in=NodeStateSource.values),
                name="node_state_source_valid",
            ),
            models.CheckConstraint(condition=Q(gpus__gte=1), name="node_has_gpus"),
        ]
        indexes = [
            # Heartbeat expiry: live nodes of a cluster whose last heartbeat is too old.
            models.Index(fields=["state", "last_heartbeat"], name="node_heartbeat_expiry"),
        ]

    def __str__(self) -> str:
        return self.name


class NodeAgent(models.Model):
    """Credentials of one node agent: a token, stored only as its SHA-256 hex digest.

    The raw token is shown once when created (``node_agent_create``). An agent acts for one
    node of its cluster; ``node`` is set when it registers.
    """

    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=120, help_text="The node name the agent registers as.")
    node = models.OneToOneField(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="agent"
    )
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(
        max_length=8, help_text="First characters, to tell tokens apart."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_seen_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"], name="node_agent_unique_in_cluster"
            ),
        ]

    def __str__(self) -> str:
        return f"agent {self.name} ({self.token_prefix}…)"

    @property
    def is_active(self) -> bool:
        """Whether the token may still authenticate."""
        return self.revoked_at is None
