"""Forced preemption: an operator stops a running workload now, inside its minimum runtime.

The engine never preempts a workload inside its minimum runtime (``docs/design.md``, "Preemption"); an
operator may, when a run must stop now (a runaway job, a node needing urgent repair of one
workload). The run is stopped like any preemption — stop orders to its agents, the workload
``preempted`` until they confirm, then requeued with its submit time kept (resumable work
continues from its checkpoint) — and the act is recorded in the audit trail with the
operator's reason, in the same transaction.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from governance.choices import AuditAction
from governance.selectors.visibility import user_visibility
from governance.services.audit import audit_record
from scheduler.choices import RunEndReason, WorkloadState
from scheduler.models import Run, Workload
from scheduler.selectors.protection import protected_until
from scheduler.services.runs import run_request_stop

MAX_REASON_LENGTH = 500


def workload_preempt_force(
    *, workload: Workload, actor, reason: str, now: datetime | None = None
) -> Run:
    """Stop ``workload``'s running run now, bypassing its minimum runtime; return the run.

    Only an org admin of the workload's cluster's organization (the operators of its nodes)
    may, else ``PermissionDenied``. ``reason`` is required (``ValidationError`` on
    ``reason``); a workload that is not running, or whose run is already stopping, is a
    ``ValidationError`` on ``state``. Nothing is written when any check fails.
    """
    vis = user_visibility(user=actor)
    organization_id = workload.cluster.organization_id
    if not vis.is_org_admin(organization_id):
        raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
    reason = str(reason or "").strip()
    if not reason:
        raise ValidationError({"reason": ["Say why this run must stop now."]})
    if len(reason) > MAX_REASON_LENGTH:
        raise ValidationError({"reason": [f"At most {MAX_REASON_LENGTH} characters."]})
    now = now or timezone.now()
    with transaction.atomic():
        # Lock order of scheduler/services/runs.py: the workload row, then the run row.
        fresh = Workload.objects.select_for_update().get(pk=workload.pk)
        run = Run.objects.filter(workload=fresh, ended_at__isnull=True).first()
        if fresh.state != WorkloadState.RUNNING or run is None:
            raise ValidationError(
                {"state": [f"{fresh.name} is {fresh.get_state_display().lower()}, not running."]}
            )
        if run.stop_requested_at is not None:
            raise ValidationError({"state": [f"{fresh.name}'s run is already stopping."]})
        protected = protected_until(
            started_at=run.started_at,
            min_runtime_seconds=fresh.min_runtime_seconds,
            recorded=run.protected_until,
        )
        who = getattr(actor, "username", "an operator")
        run = run_request_stop(
            run=run,
            reason=RunEndReason.PREEMPTED,
            explanation=f"forced by {who}: {reason}",
            now=now,
        )
        fresh.state = WorkloadState.PREEMPTED
        fresh.state_changed_at = now
        fresh.queue_key = None
        said = fresh.reason_set(f"Preempted by {who} (forced, minimum runtime bypassed): {reason}")
        fresh.save(update_fields=["state", "state_changed_at", "queue_key", *said])
        audit_record(
            action=AuditAction.RUN_PREEMPT_FORCED,
            organization_id=organization_id,
            actor=actor,
            object_kind="workload",
            object_id=fresh.pk,
            object_label=f"{fresh.name} (run {run.attempt})",
            before={
                "state": WorkloadState.RUNNING,
                "run": run.pk,
                "protected_until": protected,
            },
            after={"state": WorkloadState.PREEMPTED, "stop_requested_at": now},
            reason=reason,
            at=now,
        )
    return run
