"""Requested share changes and the history of their decisions."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from governance.choices import ApprovalState, DecisionAction
from governance.models.allocations import PERCENT_VALIDATORS
from governance.models.fields import actor_field
from governance.models.tree import Cluster, Organization, Program, Project


class ApprovalRequest(models.Model):
    """A requested change of shares among the children of one node on one cluster.

    The children are the programs of ``organization`` (when ``program`` is empty) or the
    projects of ``program``. A manager of that parent node decides it; every step is kept in
    ``ApprovalDecision`` rows. Approved requests apply at ``effective_from``.
    """

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="approval_requests"
    )
    program = models.ForeignKey(
        Program, null=True, blank=True, on_delete=models.PROTECT, related_name="approval_requests"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="approval_requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approval_requests"
    )
    reason = models.TextField()
    effective_from = models.DateTimeField()
    effective_to = models.DateTimeField(null=True, blank=True)
    state = models.CharField(
        max_length=20, choices=ApprovalState.choices, default=ApprovalState.DRAFT
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=ApprovalState.values), name="approval_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(effective_to__isnull=True)
                | Q(effective_to__gt=models.F("effective_from")),
                name="approval_effective_to_after_from",
            ),
        ]
        indexes = [
            # The inbox: open requests under one parent node.
            models.Index(fields=["organization", "program", "state"], name="approval_inbox"),
        ]

    def __str__(self) -> str:
        return f"Request #{self.pk} ({self.get_state_display()})"

    @property
    def parent(self) -> Organization | Program:
        """The node whose children's shares this request changes."""
        return self.program or self.organization


class ApprovalLine(models.Model):
    """One requested change in an approval request: a child node's new percent."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="lines")
    program = models.ForeignKey(
        Program, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    percent = models.DecimalField(max_digits=5, decimal_places=2, validators=PERCENT_VALIDATORS)
    previous_percent = models.DecimalField(
        max_digits=5, decimal_places=2, help_text="The node's share when the request was made."
    )

    class Meta:
        ordering = ["request_id", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(program__isnull=False, project__isnull=True)
                | Q(program__isnull=True, project__isnull=False),
                name="approval_line_names_one_node",
            ),
            models.CheckConstraint(
                condition=Q(percent__gte=0, percent__lte=100), name="approval_line_percent_0_100"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node}: {self.previous_percent}% → {self.percent}%"

    @property
    def node(self) -> Program | Project:
        """The program or project whose share this line changes."""
        return self.program or self.project


class ApprovalDecision(models.Model):
    """One step in an approval request's history: who did what, when, with which comment."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="decisions")
    actor = actor_field(
        help_text="Empty when the system acted (applying an approved change at its date)."
    )
    action = models.CharField(max_length=20, choices=DecisionAction.choices)
    from_state = models.CharField(max_length=20, choices=ApprovalState.choices, blank=True)
    to_state = models.CharField(max_length=20, choices=ApprovalState.choices)
    comment = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["request_id", "at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=DecisionAction.values), name="decision_action_valid"
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.get_action_display()} by {self.actor or 'system'} at {self.at:%Y-%m-%d %H:%M}"
        )
