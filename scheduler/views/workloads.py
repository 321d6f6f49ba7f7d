"""The workload pages: "My queue" (state, place in the fair-share order, the engine's
reason, minimum-runtime protection, preemptions, estimated start), the submit form (one
workload or a sweep file), one workload's page and its cancellation."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe
from rest_framework.exceptions import ValidationError as DRFValidationError

from governance.api_errors import flatten_errors
from governance.figures import figure_json
from governance.figures_dashboards import run_utilization_lines
from governance.models import Cluster, Project
from governance.views.common import visibility_of
from scheduler.api.views import sweep_submit
from scheduler.choices import RunEndReason, RunLane, WorkloadState
from scheduler.forms import SweepUploadForm, WorkloadSubmitForm
from scheduler.models import Run
from scheduler.selectors.estimates import CAVEAT, estimate_range, workload_estimates
from scheduler.selectors.protection import protected_until
from scheduler.selectors.queue import QueueParamError, queue_page
from scheduler.selectors.queue_positions import queue_positions_attach
from scheduler.selectors.utilization import idle_policy_effective
from scheduler.selectors.workload_utilization import workload_utilization_traces
from scheduler.selectors.workloads import (
    may_cancel,
    run_stop_shown,
    visible_workloads,
    visible_workloads_with_runs,
)
from scheduler.services.workloads import workload_cancel, workload_submit
from scheduler.views.common import live_refresh

# A workload in one of these states has ended: nothing to cancel.
TERMINAL_STATES = (WorkloadState.SUCCEEDED, WorkloadState.FAILED, WorkloadState.CANCELLED)

# Badge colours of the layout (static/css/app.css), by state.
WORKLOAD_BADGES = {
    WorkloadState.PENDING: "badge-submitted",
    WorkloadState.RUNNING: "badge-applied",
    WorkloadState.PREEMPTED: "badge-approved",
    WorkloadState.SUCCEEDED: "badge-draft",
    WorkloadState.FAILED: "badge-rejected",
    WorkloadState.CANCELLED: "badge-withdrawn",
}


def _queue_facts(workloads: list) -> None:
    """Attach what "My queue" shows beyond the row: badge, position and estimated start
    (pending), minimum-runtime protection end (running), and the number of preemptions."""
    queue_positions_attach(workloads)
    estimates = workload_estimates(workloads=workloads)
    now = timezone.now()
    ids = [w.pk for w in workloads]
    preempted: dict[int, int] = {}
    for workload_id in Run.objects.filter(
        workload_id__in=ids, end_reason__in=(RunEndReason.PREEMPTED, RunEndReason.DRAINED)
    ).values_list("workload_id", flat=True):
        preempted[workload_id] = preempted.get(workload_id, 0) + 1
    open_runs = {
        workload_id: (started_at, recorded)
        for workload_id, started_at, recorded in Run.objects.filter(
            workload_id__in=ids, ended_at__isnull=True, stop_requested_at__isnull=True
        ).values_list("workload_id", "started_at", "protected_until")
    }
    for w in workloads:
        w.badge = WORKLOAD_BADGES.get(w.state, "badge-draft")
        w.preemptions = preempted.get(w.pk, 0)
        w.estimated_start = estimates.get(w.pk)
        w.has_estimate = w.pk in estimates
        w.estimate_range = estimate_range(now=now, estimate=w.estimated_start)
        run = open_runs.get(w.pk)
        w.protected_until = (
            protected_until(
                started_at=run[0], min_runtime_seconds=w.min_runtime_seconds, recorded=run[1]
            )
            if run is not None and w.state == WorkloadState.RUNNING
            else None
        )
        # Past its protection, a run may be preempted at the next cycle: say so, not a past
        # "protected until".
        w.protection_over = w.protected_until is not None and w.protected_until <= now


def _submit_form(vis, data=None) -> WorkloadSubmitForm | None:
    """The submit form, for members and PIs of a project (None for everyone else)."""
    projects = list(vis.submit_projects().select_related("program").order_by("name"))
    if not projects:
        return None
    org_ids = {p.program.organization_id for p in projects}
    clusters = list(Cluster.objects.filter(organization_id__in=org_ids).order_by("name"))
    return WorkloadSubmitForm(data, projects=projects, clusters=clusters)


def _queue_querystring(request: HttpRequest, **changes) -> str:
    """The current query string with ``changes`` applied (None drops a key), for links."""
    params = request.GET.copy()
    params.pop("live", None)
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return params.urlencode()


@login_required
@require_safe
def workloads(request: HttpRequest) -> HttpResponse:
    """My queue: workloads of the projects the user sees, filtered by state, project, cluster
    and "only mine", sorted (waiting and running first by default) and paged. Pending ones
    carry an estimated start. A parameter the page cannot read is a 400 naming it."""
    vis = visibility_of(request)
    try:
        queue = queue_page(request=request, vis=vis)
    except QueueParamError as exc:
        return render(
            request,
            "scheduler/workloads.html",
            {"error": exc, "can_submit": _submit_form(vis) is not None},
            status=400,
        )
    rows = queue.workloads
    _queue_facts(rows)
    for workload in rows:
        workload.can_cancel = workload.state not in TERMINAL_STATES and may_cancel(vis, workload)
    page = queue.page
    return render(
        request,
        "scheduler/workloads.html",
        {
            "workloads": rows,
            "page": page,
            "filter": queue.filter,
            "state": request.GET.get("state", ""),
            "counts": queue.counts,
            "states": WorkloadState.choices,
            "state_links": [
                (
                    value,
                    label,
                    queue.counts[value],
                    _queue_querystring(request, state=value, page=None),
                )
                for value, label in WorkloadState.choices
            ],
            "all_states_link": _queue_querystring(request, state=None, page=None),
            "previous_link": _queue_querystring(request, page=page.previous_page_number())
            if page.has_previous()
            else None,
            "next_link": _queue_querystring(request, page=page.next_page_number())
            if page.has_next()
            else None,
            "refresh": live_refresh(request),
            "stop_link": _queue_querystring(request, live="0"),
            "can_submit": _submit_form(vis) is not None,
            "caveat": CAVEAT,
            "any_estimate": any(w.has_estimate for w in rows),
        },
    )


@login_required
def workload_submit_view(request: HttpRequest) -> HttpResponse:
    """Submit a workload (members and PIs of the project; same rules as the API): the form on
    its own page (GET), checked and queued on POST."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    vis = visibility_of(request)
    sweep = request.method == "POST" and request.POST.get("form") == "sweep"
    form = _submit_form(vis, request.POST if request.method == "POST" and not sweep else None)
    if form is None:
        raise PermissionDenied("Only members of a project may submit workloads.")
    if sweep:
        return _submit_sweep(request, vis, form)
    page = {"form": form, "sweep_form": SweepUploadForm()}
    if request.method != "POST":
        return render(request, "scheduler/workload_submit.html", page)
    if not form.is_valid():
        return render(request, "scheduler/workload_submit.html", page, status=400)
    data = form.cleaned_data
    declared = data["declared_duration_minutes"]
    try:
        workload = workload_submit(
            project=Project.objects.select_related("program").get(pk=data["project"]),
            cluster=Cluster.objects.get(pk=data["cluster"]),
            name=data["name"],
            gpus=data["gpus"],
            nodes=data["nodes"],
            min_runtime_seconds=data["min_runtime_minutes"] * 60,
            resumable=data["resumable"],
            launch_spec={"command": data["command"]},
            declared_duration_seconds=declared * 60 if declared else None,
            submitted_by=request.user,
        )
    except ValidationError as exc:
        fields = {
            "min_runtime_seconds": "min_runtime_minutes",
            "declared_duration_seconds": "declared_duration_minutes",
            "launch_spec": "command",
        }
        for field, errors in exc.message_dict.items():
            name = fields.get(field, field)
            form.add_error(name if name in form.fields else None, errors)
        return render(request, "scheduler/workload_submit.html", page, status=400)
    messages.success(
        request, f"{workload.name} is queued; the next scheduling cycle places it or says why not."
    )
    return redirect("scheduler:workload-detail", pk=workload.pk)


# A refused sweep lists this many of its errors; the rest are counted.
SWEEP_ERRORS_SHOWN = 50


def _submit_sweep(request: HttpRequest, vis, form) -> HttpResponse:
    """Queue the workloads of an uploaded sweep file, all or none (``sweep_submit``); a
    refusal lists each bad item by its index, and nothing is stored."""
    sweep_form = SweepUploadForm(request.POST, request.FILES)
    page = {"form": form, "sweep_form": sweep_form}
    if not sweep_form.is_valid():
        return render(request, "scheduler/workload_submit.html", page, status=400)
    try:
        created = sweep_submit(
            vis=vis, data=sweep_form.cleaned_data["sweep_file"], user=request.user
        )
    except DRFValidationError as exc:
        errors = [
            f"{field}: {' '.join(messages)}"
            for field, messages in flatten_errors(exc.detail).items()
        ]
        page["sweep_errors"] = errors[:SWEEP_ERRORS_SHOWN]
        page["sweep_errors_more"] = max(0, len(errors) - SWEEP_ERRORS_SHOWN)
        return render(request, "scheduler/workload_submit.html", page, status=400)
    messages.success(
        request,
        f"{len(created):,} workloads are queued; the next scheduling cycle places them or says "
        "why not.",
    )
    return redirect(f"{reverse('scheduler:workloads')}?state=pending&mine=1")


@login_required
@require_safe
def workload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One workload: its state, place in the queue, the engine's reason, estimated start,
    minimum-runtime protection, its runs (with preemptions) and their GPU utilization."""
    vis = visibility_of(request)
    workload = get_object_or_404(visible_workloads_with_runs(vis), pk=pk)
    _queue_facts([workload])
    for run in workload.runs.all():
        run.preemptor_shown, run.explanation_shown = run_stop_shown(vis, run)
    can_cancel = workload.state not in TERMINAL_STATES and may_cancel(vis, workload)
    open_run = next((r for r in workload.runs.all() if r.ended_at is None), None)
    traces = workload_utilization_traces(runs=list(workload.runs.all()))
    idle = None
    if open_run is not None and open_run.idle_since is not None:
        idle = {
            "since": open_run.idle_since,
            "rule": idle_policy_effective(cluster=workload.cluster),
            "charged": open_run.lane == RunLane.CHARGED,  # the free lane is never charged
        }
    return render(
        request,
        "scheduler/workload_detail.html",
        {
            "workload": workload,
            "idle": idle,
            "traces": traces,
            "measured": any(t.hours for t in traces),
            "trace_chart": figure_json(run_utilization_lines(traces)),
            "can_cancel": can_cancel,
            # Operators may stop a running run now (scheduler/preemption_views.py).
            "can_preempt": workload.state == WorkloadState.RUNNING
            and vis.is_org_admin(workload.cluster.organization_id),
            "refresh": live_refresh(request),
            "caveat": CAVEAT,
        },
    )


@login_required
def workload_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel a workload (its submitter, a PI of its project, an org admin): GET asks to
    confirm and says what cancelling does; POST cancels."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    vis = visibility_of(request)
    workload = get_object_or_404(visible_workloads(vis).select_related("cluster"), pk=pk)
    if not may_cancel(vis, workload):
        raise PermissionDenied("You may cancel only your own workloads.")
    if workload.state in TERMINAL_STATES:
        messages.info(
            request, f"{workload.name} has already ended ({workload.get_state_display().lower()})."
        )
        return redirect("scheduler:workload-detail", pk=workload.pk)
    if request.method != "POST":
        return render(request, "scheduler/workload_cancel.html", {"workload": workload})
    workload_cancel(workload=workload, actor=request.user)
    messages.success(request, f"{workload.name} is cancelled.")
    return redirect("scheduler:workload-detail", pk=workload.pk)
