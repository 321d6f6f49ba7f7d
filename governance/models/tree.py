"""The budget tree: organizations, their programs and projects, and the clusters they share."""

from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q


class Organization(models.Model):
    """The root of a budget tree: it holds 100 % of each of its clusters."""

    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=60, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Program(models.Model):
    """A group of projects under an organization; a program manager splits it among them."""

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="programs"
    )
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60)

    class Meta:
        ordering = ["organization_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "slug"], name="program_slug_unique_in_org"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    """A leaf of the budget tree: it owns workloads and is charged for their GPU time."""

    program = models.ForeignKey(Program, on_delete=models.PROTECT, related_name="projects")
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60)
    cost_centre = models.CharField(
        max_length=60, blank=True, help_text="Finance's code for charging."
    )

    class Meta:
        ordering = ["program_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["program", "slug"], name="project_slug_unique_in_program"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Cluster(models.Model):
    """A pool of nodes of one GPU type; budgets (shares) are per cluster."""

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="clusters"
    )
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60)
    gpu_type = models.CharField(max_length=40, help_text="For example h100.")
    nodes = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    gpus_per_node = models.PositiveIntegerField(validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["organization_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "slug"], name="cluster_slug_unique_in_org"
            ),
            models.CheckConstraint(condition=Q(nodes__gte=1), name="cluster_has_nodes"),
            models.CheckConstraint(
                condition=Q(gpus_per_node__gte=1), name="cluster_nodes_have_gpus"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.gpu_type})"

    @property
    def total_gpus(self) -> int:
        """GPUs in the cluster when every node is healthy."""
        return self.nodes * self.gpus_per_node
