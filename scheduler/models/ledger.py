"""The usage ledger (``UsageRecord``), the entitlement ledger (``EntitlementRecord``), their
hourly rollup (``UsageHour``) and how far each cluster's accounting has got
(``AccountingCursor``)."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from scheduler.choices import Charge
from scheduler.models.fields import GPU_SECONDS
from scheduler.models.workloads import Run


class UsageRecord(models.Model):
    """Append-only ledger: GPU-seconds one run used in ``[interval_start, interval_end)``.

    An interval never crosses an hour boundary (so the hourly rollup is a plain sum).
    Unique on ``(run, interval_start)``: a retried accounting task cannot charge twice.

    Usage read from a scheduler this product governs but does not drive (a Slurm job, a
    Kubernetes pod) has no ``run``: it carries ``source`` (``slurm``, ``prometheus``…) and
    ``external_id`` (e.g. ``<slurm cluster>:<job id>``) instead, unique per
    ``(cluster, source, external_id, interval_start)`` — see
    ``scheduler.services.usage_external``. Every rollup, dashboard and report reads both kinds.
    """

    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="usage_records"
    )
    source = models.CharField(
        max_length=20, blank=True, help_text="Empty for runs of the live loop; else slurm, …"
    )
    external_id = models.CharField(max_length=200, blank=True)
    project = models.ForeignKey("governance.Project", on_delete=models.PROTECT, related_name="+")
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    interval_start = models.DateTimeField()
    interval_end = models.DateTimeField()
    gpus = models.PositiveIntegerField()
    gpu_seconds = models.DecimalField(**GPU_SECONDS)
    charge = models.CharField(max_length=20, choices=Charge.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["interval_start", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "interval_start"], name="usage_run_interval"),
            # Re-importing an external job (or a retried import) cannot charge twice; also
            # serves "how far has this external job been charged" (max interval_end).
            models.UniqueConstraint(
                fields=["cluster", "source", "external_id", "interval_start"],
                condition=Q(run__isnull=True),
                name="usage_external_interval",
            ),
            models.CheckConstraint(
                condition=Q(run__isnull=False, source="", external_id="")
                | (Q(run__isnull=True) & ~Q(source="") & ~Q(external_id="")),
                name="usage_run_or_external",
            ),
            models.CheckConstraint(
                condition=Q(charge__in=Charge.values), name="usage_charge_valid"
            ),
            models.CheckConstraint(
                condition=Q(interval_end__gt=F("interval_start")), name="usage_interval_positive"
            ),
            models.CheckConstraint(condition=Q(gpu_seconds__gte=0), name="usage_non_negative"),
        ]
        indexes = [
            # Reports and rebuild: a project's ledger on a cluster over time.
            models.Index(
                fields=["cluster", "project", "interval_start"], name="usage_by_project_time"
            ),
        ]

    def __str__(self) -> str:
        whose = f"run {self.run_id}" if self.run_id else f"{self.source} {self.external_id}"
        return f"{self.gpu_seconds} GPU-s {self.charge} for {whose}"


class EntitlementRecord(models.Model):
    """Append-only ledger of what a project was entitled to and asked for in an interval.

    Written by usage accounting for every project with a share or demand on the cluster:
    ``entitled_gpu_seconds`` = effective share x healthy GPUs x seconds, ``demand_gpu_seconds``
    = GPUs of its pending and running workloads x seconds (both sampled when accounted).
    Never crosses an hour boundary; unique per ``(cluster, project, interval_start)``.
    """

    project = models.ForeignKey("governance.Project", on_delete=models.PROTECT, related_name="+")
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    interval_start = models.DateTimeField()
    interval_end = models.DateTimeField()
    effective_share = models.DecimalField(
        max_digits=12, decimal_places=8, help_text="Percent of the cluster."
    )
    healthy_gpus = models.PositiveIntegerField()
    demand_gpus = models.PositiveIntegerField()
    entitled_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    demand_gpu_seconds = models.DecimalField(**GPU_SECONDS)

    class Meta:
        ordering = ["interval_start", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "project", "interval_start"], name="entitlement_interval"
            ),
            models.CheckConstraint(
                condition=Q(interval_end__gt=F("interval_start")),
                name="entitlement_interval_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project_id} entitled {self.entitled_gpu_seconds} GPU-s"


class UsageHour(models.Model):
    """Hourly rollup per project and cluster: charged, entitled and demanded GPU-seconds.

    A cache of the two ledgers (``UsageRecord``, ``EntitlementRecord``), updated
    incrementally by accounting and rebuilt by ``manage.py rebuild_usage``. Owed for the hour
    = min(entitled, demand); delivered = budgeted + burst.
    """

    project = models.ForeignKey("governance.Project", on_delete=models.PROTECT, related_name="+")
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    hour = models.DateTimeField(help_text="Start of the hour (UTC).")
    budgeted_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    burst_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    free_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    entitled_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    demand_gpu_seconds = models.DecimalField(**GPU_SECONDS)

    class Meta:
        ordering = ["hour", "project_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "project", "hour"], name="usage_hour_unique"
            ),
        ]
        indexes = [
            # Windowed fair-share usage: all projects of a cluster over the last N hours.
            models.Index(fields=["cluster", "hour"], name="usage_hour_window"),
        ]

    def __str__(self) -> str:
        return f"{self.project_id} @ {self.hour:%Y-%m-%d %H:00}"

    @property
    def charged_gpu_seconds(self):
        """Budgeted plus burst: what counts as delivered and toward fair share."""
        return self.budgeted_gpu_seconds + self.burst_gpu_seconds


class AccountingCursor(models.Model):
    """How far entitlement and demand have been accounted for a cluster (one row per cluster)."""

    cluster = models.OneToOneField("governance.Cluster", on_delete=models.CASCADE, related_name="+")
    accounted_until = models.DateTimeField()
    # When accounting began: seconds before it were never measured (health counts from here).
    accounted_from = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.cluster_id} accounted until {self.accounted_until}"
