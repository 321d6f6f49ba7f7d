"""What researchers submit (``Workload``) and each start of it on GPUs (``Run``, with one
``RunNode`` per node it holds)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from scheduler.choices import RunEndReason, RunLane, WorkloadState
from scheduler.models.cycles import ProjectStanding
from scheduler.models.fields import MAX_MIN_RUNTIME_SECONDS
from scheduler.models.nodes import Node


class Workload(models.Model):
    """A request for ``gpus`` GPUs on one cluster, charged to ``project``.

    ``nodes`` > 1 is a gang: ``gpus`` spread over that many whole nodes, all or nothing.
    ``min_runtime_seconds`` (0-8 h) protects each run from preemption; 0 is the free lane.
    ``engine_reason`` and ``queue_key`` are written by each scheduling cycle for pending
    workloads. The reason's first words, where the project stands, are kept once per project
    (``ProjectStanding``); ``reason`` is the whole sentence. The keys sort like the fair-share
    order, and a cycle changes as few as it can (``scheduler.services.queue_keys``); the
    position people see (1 = next) is counted from them when read
    (``scheduler.selectors.queue_positions``). Both are empty when not pending.
    """

    project = models.ForeignKey("governance.Project", on_delete=models.PROTECT, related_name="+")
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    name = models.CharField(max_length=200)
    gpus = models.PositiveIntegerField()
    nodes = models.PositiveIntegerField(default=1)
    min_runtime_seconds = models.PositiveIntegerField(default=0)
    resumable = models.BooleanField(default=True)
    priority = models.IntegerField(default=0, help_text="Higher runs first within the project.")
    launch_spec = models.JSONField(
        default=dict, blank=True, help_text='{"command": [...]} or {"image": ..., "args": [...]}'
    )
    declared_duration_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="For the simulated executor: how long the work takes."
    )
    state = models.CharField(
        max_length=20, choices=WorkloadState.choices, default=WorkloadState.PENDING
    )
    submitted_at = models.DateTimeField()
    first_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    engine_reason = models.TextField(blank=True)
    # Set by a cycle when ``engine_reason`` continues the project's standing, kept once per
    # project (``ProjectStanding``); ``reason`` puts the two together.
    reason_follows_standing = models.BooleanField(default=False)
    queue_key = models.BigIntegerField(null=True, blank=True)
    # When the engine first saw this pending gang blocked at the head of its project's turn
    # (it holds nodes once that is long enough); written by each cycle, read by the next.
    blocked_since = models.DateTimeField(null=True, blank=True)
    # When this pending workload's break-even patience ends (it searches for victims to evict
    # only then); written by each cycle, read by the next.
    patient_until = models.DateTimeField(null=True, blank=True)
    burst_rank = models.PositiveIntegerField(
        default=0,
        help_text="debug-class work: how many debug-class workloads the same submitter sent to "
        "the same project and cluster in the 30 minutes before (the engine orders a lone "
        "debug job before the tail of a sweep)",
    )
    exit_code = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=WorkloadState.values), name="workload_state_valid"
            ),
            models.CheckConstraint(condition=Q(gpus__gte=1), name="workload_gpus_positive"),
            models.CheckConstraint(condition=Q(nodes__gte=1), name="workload_nodes_positive"),
            models.CheckConstraint(
                condition=Q(min_runtime_seconds__gte=0)
                & Q(min_runtime_seconds__lte=MAX_MIN_RUNTIME_SECONDS),
                name="workload_min_runtime_0_8h",
            ),
            models.CheckConstraint(
                condition=Q(declared_duration_seconds__isnull=True)
                | Q(declared_duration_seconds__gt=0),
                name="workload_declared_duration_positive",
            ),
        ]
        indexes = [
            # The scheduling cycle: pending/running/preempted workloads of one cluster. Not
            # the queue key: a cycle rewrites keys, and an indexed column would turn those
            # rewrites from in-page (HOT) updates into updates of every index.
            models.Index(fields=["cluster", "state"], name="workload_cycle_read"),
            # A researcher's list: a project's workloads by state, newest first.
            models.Index(fields=["project", "state", "-submitted_at"], name="workload_by_project"),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    def reason_set(self, text: str) -> list[str]:
        """Give the workload a reason of its own, one that does not continue its project's
        standing (requeued, cancelled, finished …), and return the fields to save."""
        self.engine_reason, self.reason_follows_standing = text, False
        return ["engine_reason", "reason_follows_standing"]

    @property
    def reason(self) -> str:
        """Why the workload is where it is, in full: the project's standing (when the reason
        continues it) and the workload's own reason. Querysets that list many workloads
        annotate ``standing_phrase`` (``scheduler.selectors.workloads.with_standing``); without
        it the phrase is read here."""
        if not self.reason_follows_standing:
            return self.engine_reason
        phrase = getattr(self, "standing_phrase", _UNREAD)
        if phrase is _UNREAD:
            phrase = (
                ProjectStanding.objects.filter(
                    cluster_id=self.cluster_id, project_id=self.project_id
                )
                .values_list("phrase", flat=True)
                .first()
            )
        return f"{phrase}; {self.engine_reason}" if phrase else self.engine_reason


# A phrase not read yet (None is a phrase the database does not have).
_UNREAD = object()


class Run(models.Model):
    """One start of a workload on its GPUs, from the cycle that started it until it ended.

    ``placement`` is ``{node name: gpus}`` (the engine's form); ``RunNode`` rows hold the
    same with node keys. A run is open while ``ended_at`` is empty; at most one open run per
    workload (a database constraint), so a retried cycle cannot start a workload twice.
    ``stop_requested_at`` is set when a stop was ordered (preemption, drain, cancel): the run
    stays open — and charged — until the agent acknowledges the stop or reports the exit.
    ``accounted_until`` is how far the usage ledger has been written for this run.
    ``protected_until`` is when the engine stops protecting the run from preemption, as it
    decided at the start (``scheduler.selectors.protection``); empty for runs it did not
    start itself (generated history). ``loan_for`` is the pending workload whose held node
    this run borrows (short work on GPUs kept free for a blocked workload): the engine
    evicts the run for that workload once it is past its protection.
    """

    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="runs")
    attempt = models.PositiveIntegerField(help_text="1 for the first start, 2 after a requeue…")
    project = models.ForeignKey("governance.Project", on_delete=models.PROTECT, related_name="+")
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    gpus = models.PositiveIntegerField()
    lane = models.CharField(max_length=20, choices=RunLane.choices)
    placement = models.JSONField(default=dict)
    node_set = models.ManyToManyField(Node, through="RunNode", related_name="runs")
    started_at = models.DateTimeField()
    start_reason = models.TextField(blank=True)
    protected_until = models.DateTimeField(null=True, blank=True)
    loan_for = models.ForeignKey(
        Workload,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the pending workload whose held node this run borrows GPUs of",
    )
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=20, choices=RunEndReason.choices, blank=True)
    stop_explanation = models.TextField(blank=True)
    preempted_by = models.ForeignKey(
        Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=20, choices=RunEndReason.choices, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    accounted_until = models.DateTimeField()
    # Set by the idle rule (``scheduler.services.idle_rule.idle_rule_apply``) when the run's
    # GPUs were allocated but nearly unused for the cluster's idle window; cleared when busy.
    idle_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["workload", "attempt"], name="run_attempt_unique"),
            models.UniqueConstraint(
                fields=["workload"],
                condition=Q(ended_at__isnull=True),
                name="run_one_open_per_workload",
            ),
            models.CheckConstraint(condition=Q(lane__in=RunLane.values), name="run_lane_valid"),
            models.CheckConstraint(
                condition=Q(end_reason="") | Q(end_reason__in=RunEndReason.values),
                name="run_end_reason_valid",
            ),
            models.CheckConstraint(
                condition=Q(stop_reason="") | Q(stop_reason__in=RunEndReason.values),
                name="run_stop_reason_valid",
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True, end_reason="")
                | (Q(ended_at__isnull=False) & ~Q(end_reason="")),
                name="run_ended_has_reason",
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at")),
                name="run_ends_after_start",
            ),
            models.CheckConstraint(condition=Q(gpus__gte=1), name="run_gpus_positive"),
        ]
        indexes = [
            # The cycle and usage accounting: open runs of a cluster.
            models.Index(
                fields=["cluster"], condition=Q(ended_at__isnull=True), name="run_open_by_cluster"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.attempt} of workload #{self.workload_id}"


class RunNode(models.Model):
    """The GPUs a run holds on one node (a gang run has one row per node)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="run_nodes")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="run_nodes")
    gpus = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "node"], name="run_node_unique"),
            models.CheckConstraint(condition=Q(gpus__gte=1), name="run_node_gpus_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.run} on {self.node}: {self.gpus} GPUs"
