"""What node agents measured of GPU use (``UtilizationHour``, summed per day in
``UtilizationDay``) and each cluster's idle-allocation rule (``IdlePolicy``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from scheduler.models.fields import GPU_SECONDS
from scheduler.models.nodes import Node
from scheduler.models.workloads import Run


class UtilizationHour(models.Model):
    """GPU utilization of one run on one node within one UTC hour, as its agent measured it.

    Beside the usage ledger, not part of it: nothing is charged from these rows.
    ``allocated_gpu_seconds`` is the GPU-seconds the agent watched, ``busy_gpu_seconds`` the
    part the GPUs were busy (busy <= allocated, a database constraint). Periods the agent had
    no GPU telemetry for are not stored at all (never as a made-up 0 % busy).
    ``covered_from``/``reported_until`` bound the periods folded into the row and
    ``covered_seconds`` is their total length: a repeated report (same period again) is
    recognised and skipped, and the idle rule weighs the row by how much of it lies in its
    window. Written by ``scheduler.services.utilization.utilization_report``.
    """

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+")
    project = models.ForeignKey("governance.Project", on_delete=models.PROTECT, related_name="+")
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="+")
    hour = models.DateTimeField(help_text="Start of the hour (UTC).")
    allocated_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    busy_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    samples = models.PositiveIntegerField(default=0)
    memory_max_mib = models.PositiveIntegerField(null=True, blank=True)
    power_mean_watts = models.DecimalField(max_digits=12, decimal_places=3, null=True, blank=True)
    covered_from = models.DateTimeField()
    reported_until = models.DateTimeField()
    covered_seconds = models.DecimalField(max_digits=18, decimal_places=6, default=0)

    class Meta:
        ordering = ["hour", "run_id", "node_id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "node", "hour"], name="utilization_hour_unique"),
            models.CheckConstraint(
                condition=Q(busy_gpu_seconds__gte=0)
                & Q(busy_gpu_seconds__lte=F("allocated_gpu_seconds")),
                name="utilization_busy_within_allocated",
            ),
        ]
        indexes = [
            # Reports and the idle rule: a cluster's rows over a period.
            models.Index(fields=["cluster", "hour"], name="utilization_hour_window"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} on node {self.node_id} @ {self.hour:%Y-%m-%d %H:00}"


class UtilizationDay(models.Model):
    """``UtilizationHour`` summed per cluster, project and UTC day, for the pages' sums.

    Kept by database triggers on ``scheduler_utilizationhour`` (migration 0015): every
    insert, update and delete of an hour row adds its difference to its day row in the same
    transaction, so a day row always equals the sum of its hour rows — also for telemetry
    that arrives days late — and nothing in Python writes it. A page summing a month of a
    300-project cluster reads 9,000 day rows instead of some 80,000 hour rows per cluster.
    """

    # No foreign-key constraints or indexes of their own: the triggers write only what the
    # hour rows (which hold those constraints) carry, and the unique index serves the reads.
    cluster = models.ForeignKey(
        "governance.Cluster",
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    project = models.ForeignKey(
        "governance.Project",
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    day = models.DateField(help_text="UTC day.")
    allocated_gpu_seconds = models.DecimalField(**GPU_SECONDS)
    busy_gpu_seconds = models.DecimalField(**GPU_SECONDS)

    class Meta:
        ordering = ["day", "cluster_id", "project_id"]
        constraints = [
            # Also the index of the pages' reads: a cluster's days over a period.
            models.UniqueConstraint(
                fields=["cluster", "day", "project"], name="utilization_day_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"project {self.project_id} on cluster {self.cluster_id} @ {self.day}"


class IdlePolicy(models.Model):
    """A cluster's idle-allocation rule: a run whose GPUs were busy less than
    ``busy_below_percent`` % over the last ``for_minutes`` (past its minimum runtime) is marked
    idle and its owner told. A cluster without a row uses the defaults
    (``scheduler.selectors.utilization.idle_policy_effective``); org admins change it.
    """

    cluster = models.OneToOneField("governance.Cluster", on_delete=models.CASCADE, related_name="+")
    enabled = models.BooleanField(default=True)
    busy_below_percent = models.DecimalField(max_digits=5, decimal_places=2, default=5)
    for_minutes = models.PositiveIntegerField(default=30)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(busy_below_percent__gt=0) & Q(busy_below_percent__lte=100),
                name="idle_policy_percent_range",
            ),
            models.CheckConstraint(
                condition=Q(for_minutes__gte=5) & Q(for_minutes__lte=1440),
                name="idle_policy_minutes_range",
            ),
        ]

    def __str__(self) -> str:
        state = "on" if self.enabled else "off"
        return f"idle rule {state}: < {self.busy_below_percent} % for {self.for_minutes} min"
