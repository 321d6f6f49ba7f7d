"""What a workload's submitter is told when its runs start and end (the notification centre).

Called by ``runs.run_end`` inside its transaction, so each ended run is told once. The
submitter is told only while they still see the workload's project; the workload that
preempted theirs is named only when they may see its project ("another project's workload"
otherwise). Free-lane runs are not told about preemptions: yielding at any moment is what the
free lane is. Preemptions and successes of one project within an hour fold into one notice
(a sweep of a thousand does not send a thousand).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from governance.choices import NotificationKind
from governance.selectors.visibility import user_visibility
from governance.services.notifications import Notice, notify
from scheduler.choices import RunEndReason, RunLane
from scheduler.models import Run, Workload
from scheduler.selectors.workloads import run_stop_shown

# Minimum runtimes up to this are debug-class (the engine's default ``debug_min_runtime``).
DEBUG_CLASS_SECONDS = 1800


def run_ended_notify(*, run: Run, workload: Workload, reason: str, now) -> None:
    """Tell the submitter of ``workload`` that ``run`` ended for ``reason``."""
    user = workload.submitted_by
    if user is None or reason == RunEndReason.CANCELLED:
        return
    if reason == RunEndReason.PREEMPTED and run.lane == RunLane.FREE:
        return
    vis = user_visibility(user=user)
    project = workload.project
    if not vis.sees_project(project):
        return
    name = f"“{workload.name}”"
    link = reverse("scheduler:workload-detail", args=[workload.pk])
    queue = reverse("scheduler:workloads") + "?" + urlencode({"project": project.pk, "mine": 1})
    common = {
        "link": link,
        "organization_id": workload.cluster.organization_id,
        "event_key": f"run:{run.pk}:ended",
    }
    if reason == RunEndReason.SUCCEEDED:
        notice = Notice(
            kind=NotificationKind.WORKLOAD_FINISHED,
            title=f"{name} finished in {project.name}",
            collapse_key=f"project:{project.pk}:finished",
            burst_title=f"{{count}} of your workloads in {project.name} finished",
            burst_link=queue.replace("?", "?state=succeeded&", 1),
            **common,
        )
    elif reason == RunEndReason.FAILED:
        code = "" if run.exit_code is None else f" (exit code {run.exit_code})"
        notice = Notice(
            kind=NotificationKind.WORKLOAD_FAILED,
            title=f"{name} failed in {project.name}{code}",
            collapse_key=f"project:{project.pk}:failed",
            burst_title=f"{{count}} of your workloads in {project.name} failed",
            burst_link=queue.replace("?", "?state=failed&", 1),
            **common,
        )
    else:
        title, body = _requeued_words(run, reason, name, vis)
        notice = Notice(
            kind=NotificationKind.WORKLOAD_PREEMPTED,
            title=title,
            body=body,
            collapse_key=f"project:{project.pk}:requeued",
            burst_title=(
                f"{{count}} of your workloads in {project.name} were preempted or evicted "
                "and queued again"
            ),
            burst_link=queue.replace("?", "?state=pending&", 1),
            **common,
        )
    notify(recipients=[user], notice=notice, now=now)


def _requeued_words(run: Run, reason: str, name: str, vis) -> tuple[str, str]:
    """Title and body for a run that ended and went back to the queue."""
    if reason == RunEndReason.DRAINED:
        return (
            f"{name} was stopped: its node is drained for repair; it is queued again",
            run.stop_explanation,
        )
    if reason == RunEndReason.NODE_DOWN:
        return f"{name} was stopped: its node went down; it is queued again", ""
    if run.preempted_by_id is None:
        return f"{name} was preempted; it is queued again", run.stop_explanation
    preemptor, body = run_stop_shown(vis, run)
    kind = (
        "debug-class workload"
        if run.preempted_by.min_runtime_seconds <= DEBUG_CLASS_SECONDS
        else "workload"
    )
    if preemptor is not None:
        by = f"“{preemptor.name}”, a {kind} of {preemptor.project.name}"
    else:
        by = f"another project's {kind}"
    return f"{name} was preempted by {by}; it is queued again", body


def runs_started_notify(*, workload_ids, now) -> None:
    """Tell submitters that their workloads started, one notice per submitter and project
    for a cycle's starts (a sweep starting fifty at once is one line), folded with the
    starts of the hour before it."""
    groups: dict[tuple[int, int], list[Workload]] = {}
    started = (
        Workload.objects.filter(id__in=list(workload_ids), submitted_by__isnull=False)
        .select_related("project__program", "cluster", "submitted_by")
        .order_by("id")
    )
    for workload in started:
        groups.setdefault((workload.submitted_by_id, workload.project_id), []).append(workload)
    for workloads in groups.values():
        first = workloads[0]
        user, project = first.submitted_by, first.project
        if not user.is_active or not user_visibility(user=user).sees_project(project):
            continue
        queue = (
            reverse("scheduler:workloads")
            + "?"
            + urlencode({"state": "running", "project": project.pk, "mine": 1})
        )
        if len(workloads) == 1:
            title = f"“{first.name}” started in {project.name}"
            link = reverse("scheduler:workload-detail", args=[first.pk])
        else:
            title = f"{len(workloads)} of your workloads in {project.name} started"
            link = queue
        notify(
            recipients=[user],
            notice=Notice(
                kind=NotificationKind.WORKLOAD_STARTED,
                title=title,
                link=link,
                organization_id=first.cluster.organization_id,
                event_key=f"started:{first.pk}:{now.isoformat()}",
                collapse_key=f"project:{project.pk}:started",
                burst_title=f"{{count}} of your workloads in {project.name} started",
                burst_link=queue,
                count=len(workloads),
            ),
            now=now,
        )
