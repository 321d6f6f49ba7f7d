"""Serializers of the scheduler API: output shapes, and input shapes checked before services.

Input serializers check types and ranges only; the business rules (GPUs within the cluster,
whole nodes for gangs, minimum runtime 0 to 8 h, launch spec shape, state transitions) are the
services', which answer with ``ValidationError``s naming the field.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.filters import visibility_of
from scheduler.choices import ExitOutcome, RunLane
from scheduler.models import MAX_MIN_RUNTIME_SECONDS, Node, NodeAgent, Order, Run, Workload
from scheduler.selectors.protection import protected_until
from scheduler.selectors.queue_positions import queue_positions
from scheduler.selectors.utilization import FOR_MINUTES, PERCENT_MAX, PERCENT_PLACES
from scheduler.selectors.workloads import may_cancel, run_stop_shown
from scheduler.services.workloads import MAX_BULK_WORKLOADS

# --- Workloads ------------------------------------------------------------------------------


class RefSerializer(serializers.Serializer):
    """A related object named by id, slug and name."""

    id = serializers.IntegerField()
    slug = serializers.CharField()
    name = serializers.CharField()


def _ref(obj) -> dict:
    return {"id": obj.pk, "slug": obj.slug, "name": obj.name}


class RunSerializer(serializers.ModelSerializer):
    """One start of a workload: where, when, and why it ended (the preemption history)."""

    preempted_by = serializers.SerializerMethodField(
        help_text="The workload that preempted this run; null when the caller may not see "
        "its project."
    )
    stop_explanation = serializers.SerializerMethodField(
        help_text='Why the run was stopped; another project\'s name reads "another project" '
        "when the caller may not see it."
    )
    protected_until = serializers.SerializerMethodField(
        help_text="When the run may be preempted for other work: its minimum runtime as the "
        "engine capped it, longer for a workload preempted before (the churn budget); null "
        "for the free lane."
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "attempt",
            "gpus",
            "lane",
            "placement",
            "started_at",
            "start_reason",
            "protected_until",
            "stop_requested_at",
            "stop_reason",
            "stop_explanation",
            "preempted_by",
            "ended_at",
            "end_reason",
            "exit_code",
        ]
        read_only_fields = fields

    def _shown(self, run: Run) -> tuple:
        cache = self.context.setdefault("_run_stop_shown", {})
        if run.pk not in cache:
            request = self.context.get("request")
            # Without a request (a caller that forgot it), the narrowest reader: the run's
            # own project only.
            vis = visibility_of(request) if request is not None else None
            cache[run.pk] = run_stop_shown(vis, run)
        return cache[run.pk]

    def get_preempted_by(self, run: Run) -> int | None:
        preemptor, _ = self._shown(run)
        return None if preemptor is None else preemptor.pk

    def get_stop_explanation(self, run: Run) -> str:
        return self._shown(run)[1]

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_protected_until(self, run: Run):
        if run.lane == RunLane.FREE:
            return None
        until = protected_until(
            started_at=run.started_at,
            min_runtime_seconds=run.workload.min_runtime_seconds,
            recorded=run.protected_until,
        )
        return None if until is None else serializers.DateTimeField().to_representation(until)


ENV_MASK = "********"


def launch_spec_shown(spec) -> dict:
    """A launch spec as it is shown back: every value of ``env`` masked (people put secrets
    there; the agent that runs the workload gets them in its start order, nobody else)."""
    shown = dict(spec) if isinstance(spec, dict) else {}
    env = shown.get("env")
    if isinstance(env, dict):
        shown["env"] = dict.fromkeys(env, ENV_MASK)
    elif env is not None:
        shown["env"] = ENV_MASK
    return shown


class WorkloadSerializer(serializers.ModelSerializer):
    """A workload as its owners see it: state, place in the queue, the engine's reason."""

    project = serializers.SerializerMethodField()
    cluster = serializers.SerializerMethodField()
    submitted_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    preemptions = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField(
        help_text="Pending: the place in the cluster's fair-share order at the last scheduling "
        "cycle (1 = next); null otherwise, and until the first cycle after submit."
    )
    launch_spec = serializers.SerializerMethodField(
        help_text="What the workload runs: shown to its submitter, the project's PIs and org "
        "admins (null to anyone else), with the values of env masked."
    )

    class Meta:
        model = Workload
        fields = [
            "id",
            "name",
            "project",
            "cluster",
            "submitted_by",
            "gpus",
            "nodes",
            "min_runtime_seconds",
            "resumable",
            "priority",
            "launch_spec",
            "declared_duration_seconds",
            "state",
            "submitted_at",
            "first_started_at",
            "finished_at",
            "queue_position",
            "engine_reason",
            "exit_code",
            "preemptions",
        ]
        read_only_fields = fields

    @extend_schema_field(RefSerializer)
    def get_project(self, workload) -> dict:
        return _ref(workload.project)

    @extend_schema_field(RefSerializer)
    def get_cluster(self, workload) -> dict:
        return _ref(workload.cluster)

    @extend_schema_field({"type": "object", "nullable": True})
    def get_launch_spec(self, workload) -> dict | None:
        request = self.context.get("request")
        if request is None or not may_cancel(visibility_of(request), workload):
            return None
        return launch_spec_shown(workload.launch_spec)

    def get_queue_position(self, workload) -> int | None:
        """Counted once for a whole list (one query per cluster), not once per row."""
        positions = self.context.get("queue_positions")
        if positions is None:
            listed = isinstance(self.parent, serializers.ListSerializer)
            batch = self.parent.instance if listed else [workload]
            positions = self.context["queue_positions"] = queue_positions(batch)
        return positions.get(workload.id)

    def get_preemptions(self, workload) -> int:
        """How many runs ended by preemption or drain (prefetched runs, no extra query)."""
        return sum(1 for run in workload.runs.all() if run.end_reason in ("preempted", "drained"))


class WorkloadDetailSerializer(WorkloadSerializer):
    """A workload with its runs, newest first: the preemption history."""

    runs = RunSerializer(many=True, read_only=True)

    class Meta(WorkloadSerializer.Meta):
        fields = [*WorkloadSerializer.Meta.fields, "runs"]
        read_only_fields = fields


class WorkloadSubmitSerializer(serializers.Serializer):
    """What a researcher submits. ``project`` and ``cluster`` take an id or a slug."""

    project = serializers.CharField(help_text="Id or slug of a project you belong to.")
    cluster = serializers.CharField(
        required=False,
        help_text="Id or slug of a cluster of the project's organization "
        "(may be left out when the organization has one cluster).",
    )
    name = serializers.CharField(required=False, max_length=200, allow_blank=False)
    gpus = serializers.IntegerField(min_value=1)
    nodes = serializers.IntegerField(min_value=1, default=1, help_text="Whole nodes of a gang.")
    min_runtime_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_MIN_RUNTIME_SECONDS,
        default=0,
        help_text="Protected from preemption this long in each run; 0 is the free lane.",
    )
    resumable = serializers.BooleanField(default=True)
    priority = serializers.IntegerField(default=0, min_value=-1000, max_value=1000)
    launch_spec = serializers.JSONField(
        help_text='{"command": ["python", "train.py"]} (or a shell line), optional "args", '
        '"env", "cwd"; or {"image": ..., "args": [...]} for container executors.'
    )
    declared_duration_seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="For the simulated executor."
    )

    def validate_launch_spec(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError('Must be an object such as {"command": [...]}.')
        return value


class WorkloadBulkSubmitSerializer(serializers.Serializer):
    """A sweep: up to 1,000 workloads, each as in a single submit, stored all or none."""

    workloads = WorkloadSubmitSerializer(
        many=True,
        allow_empty=False,
        max_length=MAX_BULK_WORKLOADS,
        help_text=f"1 to {MAX_BULK_WORKLOADS} workloads; a bad one is named by its index.",
    )


class WorkloadBulkResultSerializer(serializers.Serializer):
    """What a sweep created: how many, and their ids in the order given."""

    count = serializers.IntegerField()
    ids = serializers.ListField(child=serializers.IntegerField())


# --- Nodes and agents -----------------------------------------------------------------------


class NodeSerializer(serializers.ModelSerializer):
    """A node with its state, who set it, and the GPUs its open runs hold."""

    cluster = serializers.SerializerMethodField()
    gpus_in_use = serializers.IntegerField(read_only=True)
    running = serializers.IntegerField(read_only=True, help_text="Open runs on this node.")

    class Meta:
        model = Node
        fields = [
            "id",
            "cluster",
            "name",
            "gpus",
            "gpus_in_use",
            "running",
            "state",
            "state_source",
            "state_reason",
            "state_changed_at",
            "last_heartbeat",
        ]
        read_only_fields = fields

    @extend_schema_field(RefSerializer)
    def get_cluster(self, node) -> dict:
        return _ref(node.cluster)


class NodeActionSerializer(serializers.Serializer):
    """An operator's reason for a drain or a mark-down (kept with the node's state)."""

    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class NodeAgentSerializer(serializers.ModelSerializer):
    """An agent's credentials as listed: never the token itself, only its prefix."""

    cluster = serializers.PrimaryKeyRelatedField(read_only=True)
    # No node until the agent registers (the schema said "integer"; found by the API fuzzer).
    node = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)

    class Meta:
        model = NodeAgent
        fields = ["id", "cluster", "name", "node", "token_prefix", "created_at", "last_seen_at"]
        read_only_fields = fields


class NodeAgentCreatedSerializer(NodeAgentSerializer):
    """A new agent with its token: shown this once, stored only as a digest."""

    token = serializers.CharField(read_only=True)

    class Meta(NodeAgentSerializer.Meta):
        fields = [*NodeAgentSerializer.Meta.fields, "token"]
        read_only_fields = fields


class NodeAgentCreateSerializer(serializers.Serializer):
    """Create an agent token for the node ``name`` of ``cluster``."""

    cluster = serializers.IntegerField(min_value=1)
    name = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        max_length=120,
        help_text="The node name the agent will register as.",
    )


# --- The node agent protocol ----------------------------------------------------------------


class AgentRegisterSerializer(serializers.Serializer):
    """An agent announcing itself: its node name (must match its token) and GPUs."""

    node = serializers.CharField(max_length=120)
    gpus = serializers.IntegerField(min_value=1, max_value=1024)
    gpu_indices = serializers.ListField(
        child=serializers.CharField(max_length=16), required=False, max_length=1024
    )
    version = serializers.CharField(required=False, max_length=40, default="")


class AgentRegisteredSerializer(serializers.Serializer):
    """The server's answer to a registration."""

    node = serializers.CharField()
    cluster = serializers.CharField()
    state = serializers.CharField()
    heartbeat_seconds = serializers.FloatField()
    open_runs = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Runs the server believes are on this node: a fresh agent reports them lost.",
    )


class AgentHeartbeatSerializer(serializers.Serializer):
    """A heartbeat: the runs the agent's processes carry."""

    running = serializers.ListField(
        child=serializers.CharField(max_length=40), required=False, default=list, max_length=4096
    )


class AgentHeartbeatAnswerSerializer(serializers.Serializer):
    """The node's state, and runs the agent must stop (the server has ended them)."""

    state = serializers.CharField()
    stop_runs = serializers.ListField(child=serializers.IntegerField())


class OrderSerializer(serializers.ModelSerializer):
    """An order as an agent receives it: the model's fields with the payload flattened in."""

    class Meta:
        model = Order
        fields = ["id", "kind", "idempotency_key", "run", "state", "delivery_count"]
        read_only_fields = fields

    def to_representation(self, order):
        data = dict(order.payload or {})
        data.update(super().to_representation(order))
        return data


class OrderListSerializer(serializers.Serializer):
    """Orders for the agent's node, stops before starts."""

    orders = OrderSerializer(many=True)


class OrderAckSerializer(serializers.Serializer):
    """An agent's acknowledgement of an order (``status`` and ``message`` are informative)."""

    status = serializers.ChoiceField(
        choices=["started", "stopped", "rejected"], required=False, default="started"
    )
    message = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class RunExitSerializer(serializers.Serializer):
    """How a run's process ended on the agent's node."""

    outcome = serializers.ChoiceField(choices=ExitOutcome.choices)
    exit_code = serializers.IntegerField(required=False, allow_null=True, default=None)
    message = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class AgentAnswerSerializer(serializers.Serializer):
    """A short answer to an acknowledgement or exit report."""

    id = serializers.IntegerField()
    state = serializers.CharField()


class MeasuredDecimalField(serializers.DecimalField):
    """A measured quantity: more decimal places than stored are rounded (half even), not
    refused (agents measure in floats); NaN and infinities are still refused."""

    def validate_precision(self, value):
        if value.is_finite():
            value = value.quantize(
                Decimal(1).scaleb(-self.decimal_places), rounding=ROUND_HALF_EVEN
            )
        return super().validate_precision(value)


class UtilizationItemSerializer(serializers.Serializer):
    """What an agent measured of one run on its node over one period.

    ``busy_gpu_seconds`` null: the node has no GPU telemetry for the period (nothing is
    stored for it, never a 0 % busy)."""

    run = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    allocated_gpu_seconds = MeasuredDecimalField(max_digits=24, decimal_places=6, min_value=0)
    busy_gpu_seconds = MeasuredDecimalField(
        max_digits=24, decimal_places=6, min_value=0, allow_null=True
    )
    samples = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
    memory_max_mib = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, allow_null=True, default=None
    )
    power_mean_watts = MeasuredDecimalField(
        max_digits=12, decimal_places=3, min_value=0, required=False, allow_null=True, default=None
    )


class UtilizationReportSerializer(serializers.Serializer):
    """A batch of an agent's utilization periods (1 to 1,000; all stored or none)."""

    reports = UtilizationItemSerializer(
        many=True, help_text="1 to 1,000 periods; a bad one is named by its index."
    )


class UtilizationAnswerSerializer(serializers.Serializer):
    """Hour rows written, periods skipped as repeats, periods without GPU telemetry."""

    stored = serializers.IntegerField()
    repeated = serializers.IntegerField()
    no_telemetry = serializers.IntegerField()


class IdlePolicySerializer(serializers.Serializer):
    """A cluster's idle rule: runs busy below ``busy_below_percent`` % for ``for_minutes``
    past their minimum runtime are marked idle and their owners told."""

    cluster = serializers.IntegerField(read_only=True)
    enabled = serializers.BooleanField()
    # The service's bounds, checked here too, so that a body with several bad fields is
    # answered with all of them at once (not those of the serializer first, the rest later).
    busy_below_percent = serializers.DecimalField(
        max_digits=5, decimal_places=PERCENT_PLACES, max_value=PERCENT_MAX
    )
    for_minutes = serializers.IntegerField(min_value=FOR_MINUTES[0], max_value=FOR_MINUTES[1])
    is_default = serializers.BooleanField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def validate_busy_below_percent(self, value):
        """More than 0: no run is busy less than 0 %, so such a rule would never mark one."""
        if value <= 0:
            raise serializers.ValidationError(f"Must be more than 0 and at most {PERCENT_MAX}.")
        return value
