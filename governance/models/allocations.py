"""Effective-dated shares of the budget tree: append-only ``Allocation`` rows.

A change never edits an earlier row, it adds a newer one (``governance.services``).
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from governance.models.tree import Cluster, Program, Project

PERCENT_VALIDATORS = [MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))]


class Allocation(models.Model):
    """One effective-dated share of a program (of its organization) or a project (of its program).

    Append-only: a change adds a row, it never edits one. The share of a node on a cluster at
    instant t is the newest row (latest ``valid_from``, then latest id) whose window
    ``[valid_from, valid_to)`` contains t; with no such row the node holds 0 %. A row with a
    ``valid_to`` is a temporary grant: once it ends the older open row applies again.
    Siblings' shares on one cluster sum to at most 100 % at every instant; the services check
    this while holding a row lock on the parent, so concurrent writers are serialized.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="allocations")
    program = models.ForeignKey(
        Program, null=True, blank=True, on_delete=models.PROTECT, related_name="allocations"
    )
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.PROTECT, related_name="allocations"
    )
    percent = models.DecimalField(max_digits=5, decimal_places=2, validators=PERCENT_VALIDATORS)
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField()
    approval_request = models.ForeignKey(
        "ApprovalRequest",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="allocations",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["cluster_id", "valid_from", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(program__isnull=False, project__isnull=True)
                | Q(program__isnull=True, project__isnull=False),
                name="allocation_names_one_node",
            ),
            models.CheckConstraint(
                condition=Q(percent__gte=0, percent__lte=100), name="allocation_percent_0_100"
            ),
            models.CheckConstraint(
                condition=Q(valid_to__isnull=True) | Q(valid_to__gt=models.F("valid_from")),
                name="allocation_valid_to_after_from",
            ),
        ]
        indexes = [
            # Share of one node on one cluster at an instant (the tree page, the engine's input).
            models.Index(
                fields=["cluster", "program", "valid_from"], name="allocation_program_asof"
            ),
            models.Index(
                fields=["cluster", "project", "valid_from"], name="allocation_project_asof"
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.node} {self.percent}% on {self.cluster} from {self.valid_from:%Y-%m-%d %H:%M}"
        )

    @property
    def node(self) -> Program | Project:
        """The program or project this share belongs to."""
        return self.program or self.project
