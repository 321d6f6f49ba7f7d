"""The live scheduler's records: nodes and their agents, workloads, runs, orders, the usage
ledger, its hourly rollup and the record of each scheduling cycle.

State changes go through ``scheduler.services`` (compare-and-set on ``state``), never through
free-form field writes. ``UsageRecord`` and ``EntitlementRecord`` are append-only ledgers with
natural-key unique constraints so a retried task cannot charge twice; ``UsageHour`` is a cache
rebuilt from them by ``manage.py rebuild_usage``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from scheduler.choices import (
    Charge,
    NodeState,
    NodeStateSource,
    OrderKind,
    OrderState,
    RunEndReason,
    RunLane,
    WorkloadState,
)

MAX_MIN_RUNTIME_SECONDS = 8 * 3600

# Ledger amounts are exact decimals: GPUs x microsecond-precision intervals, so the ledger's
# total equals Σ GPUs x run time of the runs with no float rounding.
GPU_SECONDS = {"max_digits": 24, "decimal_places": 6, "default": 0}


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


class Workload(models.Model):
    """A request for ``gpus`` GPUs on one cluster, charged to ``project``.

    ``nodes`` > 1 is a gang: ``gpus`` spread over that many whole nodes, all or nothing.
    ``min_runtime_seconds`` (0-8 h) protects each run from preemption; 0 is the free lane.
    ``engine_reason`` and ``queue_key`` are written by each scheduling cycle for pending
    workloads: the keys sort like the fair-share order, and a cycle changes as few as it can
    (``scheduler.services.queue_keys``); the position people see (1 = next) is counted from
    them when read (``scheduler.selectors.queue_positions``). Both are empty when not pending.
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

    @property
    def is_free_lane(self) -> bool:
        """Minimum runtime 0: never charged, preemptible at any moment."""
        return self.min_runtime_seconds == 0


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
    # Set by the idle rule (``scheduler.services.utilization.idle_rule_apply``) when the run's
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


class Order(models.Model):
    """An instruction for the agent of one node: start or stop one run there.

    ``idempotency_key`` is ``"<kind>:<run id>:<node id>"``: the same decision can never be
    written twice, and an agent uses it to ignore an order it has already carried out.
    ``payload`` carries what the agent needs (workload id, launch spec, GPUs, grace seconds).
    """

    kind = models.CharField(max_length=10, choices=OrderKind.choices)
    cluster = models.ForeignKey("governance.Cluster", on_delete=models.PROTECT, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="orders")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="orders")
    state = models.CharField(max_length=20, choices=OrderState.choices, default=OrderState.CREATED)
    idempotency_key = models.CharField(max_length=100, unique=True)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    delivery_count = models.PositiveIntegerField(default=0)
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=OrderKind.values), name="order_kind_valid"),
            models.CheckConstraint(
                condition=Q(state__in=OrderState.values), name="order_state_valid"
            ),
        ]
        indexes = [
            # An agent fetching its node's open orders.
            models.Index(
                fields=["node", "created_at"],
                condition=Q(state__in=["created", "delivered"]),
                name="order_open_by_node",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.run_id} on {self.node_id} ({self.state})"


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


class SlurmConnection(models.Model):
    """How the product reaches the Slurm that schedules one of its clusters.

    ``slurm_sync`` reconciles the cluster's budget tree into this Slurm's accounts,
    associations and QOS; ``slurm_import_usage`` charges its jobs (read from ``sacct``) to
    the usage ledger. Both run the Slurm client commands on this host: ``bin_dir`` is where
    ``sacctmgr``/``sacct``/``sshare`` live (empty = ``PATH``) and ``slurm_conf`` is exported as
    ``SLURM_CONF`` (empty = the host's default). Account names are ``account_prefix`` +
    the tree's slugs, made safe for Slurm (``scheduler.adapters.slurm.names``).
    ``usage_imported_until`` is the import cursor: the next scheduled import reads
    ``sacct`` from a little before it. See docs/slurm.md.
    """

    cluster = models.OneToOneField(
        "governance.Cluster", on_delete=models.CASCADE, related_name="slurm_connection"
    )
    slurm_cluster = models.CharField(
        max_length=64, help_text="ClusterName in slurm.conf (sacctmgr's cluster=)."
    )
    bin_dir = models.CharField(
        max_length=300, blank=True, help_text="Directory of sacctmgr/sacct; empty = PATH."
    )
    slurm_conf = models.CharField(
        max_length=300, blank=True, help_text="Path exported as SLURM_CONF; empty = default."
    )
    account_prefix = models.CharField(
        max_length=20, blank=True, help_text="Prepended to every account name we manage."
    )
    parent_account = models.CharField(
        max_length=64, default="root", help_text="The Slurm account the organization sits under."
    )
    enabled = models.BooleanField(default=True, help_text="Scheduled sync and import run.")
    remove_unknown = models.BooleanField(
        default=False,
        help_text="Scheduled syncs delete accounts under the organization that the tree lacks.",
    )
    usage_imported_until = models.DateTimeField(null=True, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_sync_summary = models.TextField(blank=True)
    last_import_at = models.DateTimeField(null=True, blank=True)
    last_import_summary = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster_id"]
        constraints = [
            models.UniqueConstraint(fields=["slurm_cluster"], name="slurm_connection_unique"),
        ]

    def __str__(self) -> str:
        return f"Slurm {self.slurm_cluster} for {self.cluster}"


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
