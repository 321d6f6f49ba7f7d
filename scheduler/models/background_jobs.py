"""Replays run by a worker on a browser's request: trace simulations (``SimulationJob``) and
budget what-ifs (``WhatIfRun``), with their common state (``BackgroundJob``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class SimulationJobState(models.TextChoices):
    """Where a browser simulation is (``scheduler.services.simulations`` moves it)."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class BackgroundJob(models.Model):
    """What a replay asked for in the browser and run by a worker records of its run: its
    state (queued → running → done | failed), how far it got, its result or error, and
    when. Each job adds its own ``progress`` (what 0 … 1 counts) and inputs."""

    state = models.CharField(
        max_length=20, choices=SimulationJobState.choices, default=SimulationJobState.QUEUED
    )
    progress_note = models.CharField(max_length=300, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class SimulationJob(BackgroundJob):
    """A trace replay asked for on the simulator page, run in the background.

    ``trace_source`` is ``philly`` (the bundled trace, ``scheduler.traces.PHILLY_JOBS``) or
    ``upload``: then ``trace_csv`` holds the uploaded canonical CSV, already validated and
    size-limited (kept in the row so any worker can read it; no shared media directory).
    ``parameters`` holds the cluster shape, budgets mode, policies and the time window;
    ``result`` the metrics per policy and the figures, once ``done``. Visible to its creator
    and the org admins of ``organization``.
    """

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    organization = models.ForeignKey(
        "governance.Organization", on_delete=models.CASCADE, related_name="+"
    )
    cluster = models.ForeignKey(
        "governance.Cluster",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The cluster whose live budget tree was used (budgets = live).",
    )
    trace_source = models.CharField(max_length=20)
    trace_name = models.CharField(max_length=200, blank=True)
    trace_csv = models.TextField(blank=True)
    parameters = models.JSONField(default=dict)
    progress = models.FloatField(default=0.0, help_text="0 … 1: policies replayed / policies.")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=SimulationJobState.values), name="simulationjob_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(trace_source__in=("philly", "upload")),
                name="simulationjob_trace_source_valid",
            ),
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1),
                name="simulationjob_progress_0_1",
            ),
        ]
        indexes = [
            # The simulator page: a user's latest jobs.
            models.Index(fields=["created_by", "-created_at"], name="simulationjob_by_user"),
        ]

    def __str__(self) -> str:
        return f"simulation #{self.pk} ({self.state})"


class WhatIfRun(BackgroundJob):
    """A what-if asked for before a budget change: the cluster's last ``days`` of real demand
    (up to ``window_end``) replayed under today's tree and under today's with ``proposal``
    laid over it (``{"project-12": "25.00", …}``: children of the node ``parent_kind``-
    ``parent_id``, percent of the parent), in the background (``scheduler.services.whatif``).

    ``key`` names the pair (window, trees): a second ask for the same pair within the same
    hour gets this run instead of a new one. ``result`` holds every team's figures; what a
    viewer sees of them is decided when shown (``scheduler.selectors.whatif.teams_shown``).
    """

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.CASCADE, related_name="+")
    parent_kind = models.CharField(max_length=20)
    parent_id = models.PositiveIntegerField()
    approval_request = models.ForeignKey(
        "governance.ApprovalRequest",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The request whose change this previews, if any.",
    )
    proposal = models.JSONField(default=dict)
    days = models.PositiveSmallIntegerField()
    window_end = models.DateTimeField()
    key = models.CharField(max_length=64, db_index=True)
    progress = models.FloatField(default=0.0, help_text="0 … 1: replays done / 2.")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=SimulationJobState.values), name="whatifrun_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(parent_kind__in=("organization", "program")),
                name="whatifrun_parent_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"what-if {self.pk} on cluster {self.cluster_id} ({self.state})"
