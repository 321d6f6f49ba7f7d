"""The record of each scheduling cycle (``SchedulingCycle``) and the notes of what changed
since the last one (``WorkloadChange``)."""

from __future__ import annotations

from django.db import models


class SchedulingCycle(models.Model):
    """The record of one scheduling cycle: when, how long, what it decided, and why.

    ``reasons_summary`` counts pending workloads by the engine's reason (the most common
    reasons first, capped), so an operator sees why the queue is what it is.
    """

    cluster = models.ForeignKey("governance.Cluster", on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField()
    duration_seconds = models.FloatField()
    policy = models.CharField(max_length=40)
    pending = models.PositiveIntegerField(default=0)
    running = models.PositiveIntegerField(default=0)
    starts = models.PositiveIntegerField(default=0)
    preemptions = models.PositiveIntegerField(default=0)
    orders = models.PositiveIntegerField(default=0)
    drained_nodes = models.JSONField(default=list, blank=True)
    reasons_summary = models.JSONField(default=dict, blank=True)
    engine = models.CharField(
        max_length=80,
        blank=True,
        help_text="how the cycle got its engine: 'kept' (the worker's, brought up to date "
        "with what changed) or why it was built from the database",
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            # The operator page: the latest cycles of a cluster.
            models.Index(fields=["cluster", "-started_at"], name="cycle_latest"),
        ]

    def __str__(self) -> str:
        return f"cycle {self.cluster_id} @ {self.started_at:%H:%M:%S}"


class WorkloadChange(models.Model):
    """A note that a workload changed in a way a scheduling cycle must see: it was
    submitted, deleted, or changed state, shape, class or project, or one of its runs
    started, was told to stop or ended.

    Written by database triggers on the workload and run tables (migration 0011), so no
    writer can forget one; read and deleted by the next cycle of the workload's cluster,
    which brings the engine it keeps between cycles up to date with just these workloads
    (``scheduler.services.cycle_kept``). Plain ids, no foreign keys: a note may outlive its
    workload.
    """

    cluster_id = models.BigIntegerField()
    workload_id = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["cluster_id"], name="workload_change_by_cluster")]

    def __str__(self) -> str:
        return f"workload #{self.workload_id} changed (cluster {self.cluster_id})"


class ProjectStanding(models.Model):
    """Where a project stands in one cluster's scheduling order, in the words every pending
    reason of the project begins with ("project used more than its share over the window (rank
    2 of 5 in program vision)"), as the last cycle said it.

    Kept once per project, not in each workload's reason: a rank changes for all of a
    project's pending workloads at once, and writing it into each would rewrite thousands of
    rows a cycle. A pending workload whose ``reason_follows_standing`` is set shows this
    phrase, then ``"; "``, then its own ``engine_reason`` (``Workload.reason``).
    """

    cluster = models.ForeignKey("governance.Cluster", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("governance.Project", on_delete=models.CASCADE, related_name="+")
    phrase = models.TextField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "project"], name="standing_per_project")
        ]

    def __str__(self) -> str:
        return f"{self.project_id} on {self.cluster_id}: {self.phrase}"
