"""Serializers of workloads and their runs: what the API shows of them (launch spec with
its secrets masked, queue position, protection) and the submissions it accepts."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.filters import visibility_of
from scheduler.api.serializers.refs import RefSerializer, object_ref
from scheduler.choices import RunLane
from scheduler.models import MAX_MIN_RUNTIME_SECONDS, Run, Workload
from scheduler.selectors.protection import protected_until
from scheduler.selectors.queue_positions import queue_positions
from scheduler.selectors.workloads import may_cancel, run_stop_shown
from scheduler.services.workloads import MAX_BULK_WORKLOADS


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
    engine_reason = serializers.CharField(
        source="reason",
        read_only=True,
        help_text="Why the workload is where it is, as of the last scheduling cycle: for a "
        "pending one, where its project stands, then what it waits for.",
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
        return object_ref(workload.project)

    @extend_schema_field(RefSerializer)
    def get_cluster(self, workload) -> dict:
        return object_ref(workload.cluster)

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
