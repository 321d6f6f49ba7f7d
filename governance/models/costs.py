"""What GPU time costs, and the record of each monthly usage report sent."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from governance.models.tree import Organization


class CostRate(models.Model):
    """What one GPU-hour of a GPU type costs, effective-dated like allocations.

    The rate in force at instant t is the newest row (latest ``valid_from``, then latest id)
    whose window ``[valid_from, valid_to)`` contains t; a row with a ``valid_to`` is a
    temporary rate, after which the older open row applies again. Usage is costed hour by
    hour at the rate in force at the start of each hour (``governance.selectors.reports``).
    Hours with no rate in force have no cost (the report says so).
    """

    gpu_type = models.CharField(max_length=40, help_text="Matches Cluster.gpu_type, e.g. h100.")
    rate_per_gpu_hour = models.DecimalField(
        max_digits=12, decimal_places=4, validators=[MinValueValidator(Decimal("0"))]
    )
    currency = models.CharField(max_length=3, default="USD", help_text="ISO 4217 code.")
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["gpu_type", "valid_from", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(rate_per_gpu_hour__gte=0), name="cost_rate_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(valid_to__isnull=True) | Q(valid_to__gt=models.F("valid_from")),
                name="cost_rate_valid_to_after_from",
            ),
        ]
        indexes = [
            # The report: every rate of a GPU type that may apply in a period.
            models.Index(fields=["gpu_type", "valid_from"], name="cost_rate_asof"),
        ]

    def __str__(self) -> str:
        return (
            f"{self.gpu_type}: {self.rate_per_gpu_hour} {self.currency}/GPU-hour "
            f"from {self.valid_from:%Y-%m-%d}"
        )


class MonthlyReportDelivery(models.Model):
    """The record that an organization's monthly usage report was e-mailed (one per month).

    Written in the same transaction that sends the mail, unique per (organization, month):
    a retried or duplicated beat run finds it and sends nothing.
    """

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="report_deliveries"
    )
    month = models.DateField(help_text="First day of the reported month.")
    sent_at = models.DateTimeField()
    recipients = models.JSONField(default=list)
    total_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)

    class Meta:
        ordering = ["-month", "organization_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "month"], name="monthly_report_once_per_month"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.organization} usage report for {self.month:%Y-%m}"
