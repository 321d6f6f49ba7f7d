"""The idle-allocation rule: ``idle_rule_apply`` marks open runs whose GPUs stayed nearly
unused past their minimum runtime (``Run.idle_since``) and tells the owner once;
``idle_policy_set`` is the org admin's change of a cluster's rule. Judged from the telemetry
``utilization`` stores; nothing here charges anything.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.urls import reverse

from governance.choices import AuditAction, NotificationKind
from governance.models import Cluster
from governance.selectors.visibility import user_visibility
from governance.services.audit import audit_record
from governance.services.notifications import Notice, notify
from scheduler.models import IdlePolicy, Run
from scheduler.selectors.protection import protected_until
from scheduler.selectors.utilization import (
    FOR_MINUTES,
    PERCENT_MAX,
    PERCENT_PLACES,
    IdleRule,
    idle_policy_effective,
    idle_window,
)

ZERO = Decimal(0)
IDLE_NOTICE_KIND = NotificationKind.WORKLOAD_IDLE


def idle_rule_apply(*, cluster: Cluster, now: datetime) -> dict[str, int]:
    """Mark the open runs of ``cluster`` whose GPUs stayed nearly unused, clear those busy
    again; returns ``{"marked", "cleared", "idle"}`` (newly marked, cleared, idle after).

    A run is judged only past its minimum runtime (``protected_until`` <= now) and only when
    telemetry covers the policy's window (``selectors.utilization.idle_window``): a run the
    agent did not measure is never called idle. Its owner is told once per run. With the
    policy disabled every mark on the cluster is cleared and none is set.
    """
    policy = idle_policy_effective(cluster=cluster)
    marked = cleared = 0
    with transaction.atomic():
        open_runs = list(
            Run.objects.select_for_update(of=("self",))
            .filter(cluster=cluster, ended_at__isnull=True)
            .select_related("workload__submitted_by", "workload__project", "project")
            .order_by("pk")
        )
        if not policy.enabled:
            cleared = Run.objects.filter(cluster=cluster, idle_since__isnull=False).update(
                idle_since=None
            )
            return {"marked": 0, "cleared": cleared, "idle": 0}
        windows = idle_window(runs=open_runs, minutes=policy.for_minutes, now=now)
        for run in open_runs:
            idle = _is_idle(run, windows.get(run.pk), policy, now)
            if idle is True and run.idle_since is None:
                Run.objects.filter(pk=run.pk).update(idle_since=now)
                run.idle_since = now
                marked += 1
                _tell_owner(run, policy, now)
            elif idle is False and run.idle_since is not None:
                Run.objects.filter(pk=run.pk).update(idle_since=None)
                run.idle_since = None
                cleared += 1
        idle_now = sum(1 for run in open_runs if run.idle_since is not None)
    return {"marked": marked, "cleared": cleared, "idle": idle_now}


def _is_idle(run: Run, window, policy: IdleRule, now: datetime) -> bool | None:
    """True idle, False busy, None cannot tell (protected, or not measured over the window)."""
    protected = protected_until(
        started_at=run.started_at,
        min_runtime_seconds=run.workload.min_runtime_seconds,
        recorded=run.protected_until,
    )
    if protected is not None and protected > now:
        # Inside its minimum runtime a run is never idle (it may be warming up), and a mark
        # from before cannot be left standing either.
        return False if run.idle_since is not None else None
    if run.started_at > now - timedelta(minutes=policy.for_minutes):
        # Telemetry may cover nearly all of the window (agents report a minute late, so the
        # rule accepts a window covered to ``WINDOW_COVERAGE``), but a run younger than the
        # window cannot have been idle for all of it.
        return None
    if window is None or not window.covered:
        return None
    return window.busy_percent < policy.busy_below_percent


def _tell_owner(run: Run, policy: IdleRule, now: datetime) -> None:
    """Tell the submitter, once per run, that its GPUs are allocated but idle."""
    workload = run.workload
    user = workload.submitted_by
    if user is None or not user.is_active:
        return
    if not user_visibility(user=user).sees_project(workload.project):
        return
    notify(
        recipients=[user],
        notice=Notice(
            kind=IDLE_NOTICE_KIND,
            title=(
                f"“{workload.name}” holds {run.gpus} GPUs in {workload.project.name} "
                f"but used them less than {policy.busy_below_percent:g} % for "
                f"{policy.for_minutes} minutes"
            ),
            body="Stop or cancel it if it is stuck, so that others can use the GPUs.",
            link=reverse("scheduler:workload-detail", args=[workload.pk]),
            organization_id=run.cluster.organization_id,
            event_key=f"run:{run.pk}:idle",
        ),
        now=now,
    )


def idle_policy_set(
    *, user, cluster: Cluster, enabled: bool, busy_below_percent, for_minutes: int
) -> IdlePolicy:
    """Set ``cluster``'s idle rule (org admins of its organization only).

    Raises ``PermissionDenied`` for anyone else, ``ValidationError`` naming the field for a
    percent outside (0, 100] or minutes outside [5, 1440] (``selectors.utilization``'s
    bounds, which the API's serializer checks too); nothing changes then.
    """
    if not user_visibility(user=user).is_org_admin(cluster.organization_id):
        raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
    errors: dict[str, list[str]] = {}
    try:
        percent = Decimal(str(busy_below_percent))
    except ArithmeticError:
        percent = None
    if percent is None or not percent.is_finite() or not ZERO < percent <= PERCENT_MAX:
        errors["busy_below_percent"] = [f"Must be more than 0 and at most {PERCENT_MAX}."]
    elif percent != percent.quantize(Decimal(1).scaleb(-PERCENT_PLACES)):
        errors["busy_below_percent"] = [f"At most {PERCENT_PLACES} decimal places."]
    if isinstance(for_minutes, bool) or not isinstance(for_minutes, int):
        errors["for_minutes"] = ["Must be a whole number of minutes."]
    elif not FOR_MINUTES[0] <= for_minutes <= FOR_MINUTES[1]:
        errors["for_minutes"] = [f"Must be {FOR_MINUTES[0]} to {FOR_MINUTES[1]} minutes."]
    if not isinstance(enabled, bool):
        errors["enabled"] = ["Must be true or false."]
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        policy, _ = IdlePolicy.objects.select_for_update().get_or_create(cluster=cluster)
        before = _policy_fields(policy)
        policy.enabled = enabled
        policy.busy_below_percent = percent
        policy.for_minutes = for_minutes
        policy.updated_by = user
        policy.save()
        audit_record(
            action=AuditAction.IDLE_POLICY_CHANGE,
            organization_id=cluster.organization_id,
            actor=user,
            object_kind="cluster",
            object_id=cluster.pk,
            object_label=cluster.name,
            before=before,
            after=_policy_fields(policy),
        )
    return policy


def _policy_fields(policy: IdlePolicy) -> dict:
    """What the audit trail records of an idle rule."""
    return {
        "enabled": policy.enabled,
        # A row just made holds the model's default as given (an int) until read back.
        "busy_below_percent": Decimal(str(policy.busy_below_percent)).quantize(Decimal("0.01")),
        "for_minutes": policy.for_minutes,
    }
