"""Workloads: submission (validated at the boundary) and cancellation."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from governance.models import Cluster, Project
from scheduler.choices import FINAL_STATES, RunEndReason, WorkloadState
from scheduler.engine import PolicyParams
from scheduler.engine.bursts import counts_in_bursts
from scheduler.models import MAX_MIN_RUNTIME_SECONDS, Run, Workload
from scheduler.services.runs import cycle_enqueue, run_request_stop

# Debug-class work sent within one debug-class protection of each other is one burst: the
# engine's own bound (``scheduler.engine.bursts``).
BURST_WINDOW_SECONDS = PolicyParams().debug_min_runtime


def _burst_base(*, project, cluster, submitted_by, min_runtime_seconds: int, now) -> int:
    """How many debug-class workloads ``submitted_by`` sent to ``project`` on ``cluster``
    in the burst window before ``now`` (0 for work outside the debug class)."""
    if not counts_in_bursts(float(min_runtime_seconds), BURST_WINDOW_SECONDS):
        return 0
    return Workload.objects.filter(
        project=project,
        cluster=cluster,
        submitted_by=submitted_by,
        min_runtime_seconds__gt=0,
        min_runtime_seconds__lte=BURST_WINDOW_SECONDS,
        submitted_at__gt=now - timedelta(seconds=BURST_WINDOW_SECONDS),
        submitted_at__lte=now,
    ).count()


def _validate(
    *,
    project: Project,
    cluster: Cluster,
    name: str,
    gpus: int,
    nodes: int,
    min_runtime_seconds: int,
    launch_spec: dict,
    declared_duration_seconds: int | None,
) -> None:
    errors: dict[str, list[str]] = {}
    if not name or not str(name).strip():
        errors["name"] = ["Give the workload a name."]
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        errors["gpus"] = ["Must be a whole number of GPUs, at least 1."]
    elif gpus > cluster.total_gpus:
        errors["gpus"] = [f"{cluster.name} has {cluster.total_gpus} GPUs; asked for {gpus}."]
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        errors["nodes"] = ["Must be a whole number of nodes, at least 1."]
    elif "gpus" not in errors:
        if nodes > 1 and gpus != nodes * cluster.gpus_per_node:
            errors["nodes"] = [
                f"A gang takes whole nodes: {nodes} nodes x {cluster.gpus_per_node} GPUs "
                f"= {nodes * cluster.gpus_per_node} GPUs, not {gpus}."
            ]
        elif nodes == 1 and gpus > cluster.gpus_per_node:
            errors["nodes"] = [
                f"{gpus} GPUs do not fit on one node of {cluster.gpus_per_node}; "
                f"ask for {-(-gpus // cluster.gpus_per_node)} whole nodes."
            ]
    if (
        not isinstance(min_runtime_seconds, int)
        or isinstance(min_runtime_seconds, bool)
        or not 0 <= min_runtime_seconds <= MAX_MIN_RUNTIME_SECONDS
    ):
        errors["min_runtime_seconds"] = [
            f"Must be between 0 and {MAX_MIN_RUNTIME_SECONDS} seconds (8 h)."
        ]
    if declared_duration_seconds is not None and (
        not isinstance(declared_duration_seconds, int) or declared_duration_seconds < 1
    ):
        errors["declared_duration_seconds"] = ["Must be a positive number of seconds."]
    if not isinstance(launch_spec, dict):
        errors["launch_spec"] = ['Must be an object: {"command": [...]} or {"image": ...}.']
    elif (
        not (launch_spec.get("command") or launch_spec.get("image"))
        and declared_duration_seconds is None
    ):
        # A simulated workload (declared duration) needs nothing to run; a real one does.
        errors["launch_spec"] = ['Give a "command" or an "image" to run.']
    if project.program.organization_id != cluster.organization_id:
        errors["project"] = [f"{project} is not budgeted in {cluster.name}'s organization."]
    if errors:
        raise ValidationError(errors)


def workload_submit(
    *,
    project: Project,
    cluster: Cluster,
    name: str,
    gpus: int,
    nodes: int = 1,
    min_runtime_seconds: int = 0,
    resumable: bool = True,
    priority: int = 0,
    launch_spec: dict | None = None,
    declared_duration_seconds: int | None = None,
    submitted_by=None,
    now: datetime | None = None,
) -> Workload:
    """Queue a workload; a scheduling cycle for its cluster runs once this commits.

    Validates the request (``ValidationError`` naming the field). Whether the submitter may
    use ``project`` is the caller's check (the visibility selector).
    """
    launch_spec = {} if launch_spec is None else launch_spec
    _validate(
        project=project,
        cluster=cluster,
        name=name,
        gpus=gpus,
        nodes=nodes,
        min_runtime_seconds=min_runtime_seconds,
        launch_spec=launch_spec,
        declared_duration_seconds=declared_duration_seconds,
    )
    now = now or timezone.now()
    with transaction.atomic():
        burst_rank = _burst_base(
            project=project, cluster=cluster, submitted_by=submitted_by,
            min_runtime_seconds=min_runtime_seconds, now=now,
        )  # fmt: skip
        workload = Workload.objects.create(
            project=project,
            cluster=cluster,
            submitted_by=submitted_by,
            burst_rank=burst_rank,
            name=name.strip(),
            gpus=gpus,
            nodes=nodes,
            min_runtime_seconds=min_runtime_seconds,
            resumable=resumable,
            priority=priority,
            launch_spec=launch_spec,
            declared_duration_seconds=declared_duration_seconds,
            submitted_at=now,
            state_changed_at=now,
            engine_reason="Submitted; waiting for the next scheduling cycle.",
        )
        cycle_enqueue(cluster_id=cluster.id)
    return workload


# One call submits at most this many workloads (a sweep); more is refused, not truncated.
MAX_BULK_WORKLOADS = 1000


def workload_sweep_errors(items) -> dict[str, list[str]]:
    """What is wrong with each ``(index, item)`` of a sweep, as ``{"workloads[i].field":
    [messages]}`` (empty: nothing). Items as in ``workload_submit_many``."""
    errors: dict[str, list[str]] = {}
    for index, item in items:
        try:
            _validate(
                project=item["project"],
                cluster=item["cluster"],
                name=item.get("name", ""),
                gpus=item.get("gpus"),
                nodes=item.get("nodes", 1),
                min_runtime_seconds=item.get("min_runtime_seconds", 0),
                launch_spec=item.get("launch_spec", {}),
                declared_duration_seconds=item.get("declared_duration_seconds"),
            )
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                errors[f"workloads[{index}].{field}"] = messages
    return errors


def workload_submit_many(
    *, items: list[dict], submitted_by=None, now: datetime | None = None
) -> list[Workload]:
    """Queue a sweep: every workload of ``items`` or none, one cycle per cluster afterwards.

    Each item holds ``workload_submit``'s keyword arguments (``project`` and ``cluster``
    resolved). Every item is validated before anything is stored; a bad one raises
    ``ValidationError`` naming it by index (``workloads[3].gpus``), with every bad item of
    the call, and stores nothing. All share one submit time, in the order given.
    """
    if not items:
        raise ValidationError({"workloads": ["Give at least one workload."]})
    if len(items) > MAX_BULK_WORKLOADS:
        raise ValidationError(
            {
                "workloads": [
                    f"At most {MAX_BULK_WORKLOADS} workloads in one call, not {len(items)}."
                ]
            }
        )
    errors = workload_sweep_errors(enumerate(items))
    if errors:
        raise ValidationError(errors)
    now = now or timezone.now()
    # Each debug-class item's place in the submitter's burst: what the window already holds
    # for its project and cluster, then the sweep's own earlier items, in the order given.
    base: dict[tuple[int, int], int] = {}
    ranks: list[int] = []
    for item in items:
        runtime = item.get("min_runtime_seconds", 0)
        if not counts_in_bursts(float(runtime), BURST_WINDOW_SECONDS):
            ranks.append(0)
            continue
        key = (item["project"].pk, item["cluster"].pk)
        if key not in base:
            base[key] = _burst_base(
                project=item["project"], cluster=item["cluster"], submitted_by=submitted_by,
                min_runtime_seconds=runtime, now=now,
            )  # fmt: skip
        ranks.append(base[key])
        base[key] += 1
    rows = [
        Workload(
            project=item["project"],
            cluster=item["cluster"],
            submitted_by=submitted_by,
            name=item["name"].strip(),
            gpus=item["gpus"],
            nodes=item.get("nodes", 1),
            min_runtime_seconds=item.get("min_runtime_seconds", 0),
            resumable=item.get("resumable", True),
            priority=item.get("priority", 0),
            launch_spec=item.get("launch_spec", {}),
            declared_duration_seconds=item.get("declared_duration_seconds"),
            submitted_at=now,
            state_changed_at=now,
            engine_reason="Submitted; waiting for the next scheduling cycle.",
            burst_rank=rank,
        )
        for item, rank in zip(items, ranks, strict=True)
    ]
    with transaction.atomic():
        created = Workload.objects.bulk_create(rows)
        for cluster_id in sorted({row.cluster_id for row in created}):
            cycle_enqueue(cluster_id=cluster_id)
    return created


def workload_cancel(*, workload: Workload, actor=None, now: datetime | None = None) -> Workload:
    """Cancel a workload. Pending: at once. Running: stop orders; its run ends on the ack.

    A workload already succeeded, failed or cancelled is returned unchanged.
    """
    now = now or timezone.now()
    with transaction.atomic():
        workload = Workload.objects.select_for_update().get(pk=workload.pk)
        if workload.state in FINAL_STATES:
            return workload
        open_run = Run.objects.filter(workload=workload, ended_at__isnull=True).first()
        workload.state = WorkloadState.CANCELLED
        workload.state_changed_at = now
        workload.queue_key = None
        who = f" by {actor}" if actor else ""
        said = workload.reason_set(f"Cancelled{who}.")
        if open_run is None:
            workload.finished_at = now
        workload.save(
            update_fields=["state", "state_changed_at", "queue_key", *said, "finished_at"]
        )
        if open_run is not None and open_run.stop_requested_at is None:
            run_request_stop(
                run=open_run,
                reason=RunEndReason.CANCELLED,
                explanation=f"cancelled{who}",
                now=now,
            )
        cycle_enqueue(cluster_id=workload.cluster_id)
    return workload
