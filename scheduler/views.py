"""Browser pages of the live scheduler: the nodes of a cluster (with operator actions), the
workloads a user may see ("My queue": state, place in the fair-share order, the engine's
reason, minimum-runtime protection, preemptions, estimated start; a submit form) and the
simulator (managers and org admins replay a trace in the background).

Thin: objects come through the visibility selector (hidden ones are 404s), changes go
through the services, and the pages refresh themselves every few seconds so a running
cluster is seen moving (``?live=0`` stops it). The workload and simulation pages refresh only
their live part (``static/js/poll.js``), so a half-typed form survives.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST, require_safe
from rest_framework.exceptions import ValidationError as DRFValidationError

from governance.api_errors import flatten_errors
from governance.figures import figure_json
from governance.figures_dashboards import run_utilization_lines
from governance.models import Cluster, Organization, Project
from governance.views.common import visibility_of
from scheduler.api.views import sweep_submit
from scheduler.choices import NODE_BADGES, NodeState, RunEndReason, RunLane, WorkloadState
from scheduler.forms import SimulationForm, SweepUploadForm, WorkloadSubmitForm
from scheduler.models import Node, Run, SchedulingCycle, SimulationJob, SimulationJobState
from scheduler.selectors.estimates import CAVEAT, estimate_range, workload_estimates
from scheduler.selectors.node_map import (
    NodeFilterError,
    cluster_node_map,
    node_filters_parse,
    node_with_work,
)
from scheduler.selectors.protection import protected_until
from scheduler.selectors.queue import QueueParamError, queue_page
from scheduler.selectors.queue_positions import queue_positions_attach
from scheduler.selectors.utilization import idle_policy_effective
from scheduler.selectors.workload_utilization import workload_utilization_traces
from scheduler.selectors.workloads import may_cancel, run_stop_shown, visible_workloads
from scheduler.services.nodes import node_bring_up, node_drain, node_mark_down, node_undrain
from scheduler.services.simulations import MAX_UPLOAD_BYTES, simulation_job_create
from scheduler.services.workloads import workload_cancel, workload_submit

REFRESH_SECONDS = 5
MAX_UPLOAD_READ = MAX_UPLOAD_BYTES + 1
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

# Operator actions: URL name → (service, takes a reason, past tense for the message).
NODE_ACTIONS = {
    "drain": (node_drain, True, "is draining: it takes nothing new and empties as runs pass "
              "their minimum runtime"),
    "undrain": (node_undrain, False, "is back in service"),
    "mark-down": (node_mark_down, True, "is down; its workloads were requeued"),
    "bring-up": (node_bring_up, False, "is back up"),
}  # fmt: skip


def _live(request: HttpRequest) -> int | None:
    """Seconds between page refreshes, or None when the user turned it off."""
    return None if request.GET.get("live") == "0" else REFRESH_SECONDS


# What each operator action does, said on its confirmation page.
NODE_ACTION_EFFECTS = {
    "drain": "Nothing new lands on it; each workload on it is evicted once past its minimum "
    "runtime (and requeued), so no protected work is lost. It becomes drained when empty.",
    "undrain": "It takes new work again at the next scheduling cycle.",
    "mark-down": "Every workload on it is stopped at the next scheduling cycle and requeued, "
    "protected or not; nothing lands on it until it is brought up.",
    "bring-up": "It takes new work again at the next scheduling cycle.",
}
# Which actions a node in each state offers.
NODE_STATE_ACTIONS = {
    NodeState.HEALTHY: ("drain", "mark-down"),
    NodeState.DRAINING: ("undrain", "mark-down"),
    NodeState.DRAINED: ("undrain", "mark-down"),
    NodeState.DOWN: ("bring-up",),
}
NODE_ACTION_LABELS = {
    "drain": "Drain",
    "undrain": "Undrain",
    "mark-down": "Mark down",
    "bring-up": "Bring up",
}


@login_required
@require_safe
def nodes(request: HttpRequest) -> HttpResponse:
    """Every node of the clusters the user sees as a map of GPUs coloured by project, with
    counts per state, ``?state=`` and ``?q=`` (name contains) filters, and the drains in
    progress; each node links to its own page (where operators act)."""
    vis = visibility_of(request)
    try:
        state, search = node_filters_parse(request.GET)
    except NodeFilterError as exc:
        return render(request, "scheduler/nodes.html", {"error": exc, "groups": []}, status=400)
    groups = []
    for cluster in vis.clusters().select_related("organization").order_by("name"):
        node_map = cluster_node_map(cluster=cluster, vis=vis, state=state, search=search)
        node_map.last_cycle = SchedulingCycle.objects.filter(cluster=cluster).first()
        node_map.draining = [m for m in node_map.nodes if m.node.state == NodeState.DRAINING]
        node_map.can_operate = vis.is_org_admin(cluster.organization_id)
        groups.append(node_map)
    return render(
        request,
        "scheduler/nodes.html",
        {
            "groups": groups,
            "state": state,
            "search": search,
            "states": NodeState.choices,
            "refresh": _live(request),
            "now": timezone.now(),
        },
    )


def _operable_node(request: HttpRequest, pk: int):
    """(visibility, node) for a node of a cluster the user sees, else 404."""
    vis = visibility_of(request)
    node = get_object_or_404(
        Node.objects.filter(cluster__in=vis.clusters()).select_related("cluster"), pk=pk
    )
    return vis, node


@login_required
@require_safe
def node_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One node: state and why, heartbeat, every workload on it (with its protection), and
    for an org admin the actions its state allows."""
    vis, node = _operable_node(request, pk)
    mapped = node_with_work(node=node, vis=vis)
    can_operate = vis.is_org_admin(node.cluster.organization_id)
    return render(
        request,
        "scheduler/node_detail.html",
        {
            "mapped": mapped,
            "node": node,
            "badge": NODE_BADGES.get(node.state, "badge-draft"),
            "actions": [(a, NODE_ACTION_LABELS[a]) for a in NODE_STATE_ACTIONS.get(node.state, ())]
            if can_operate
            else [],
            "refresh": _live(request),
            "now": timezone.now(),
        },
    )


@login_required
def node_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """Drain, undrain, mark down or bring up a node (org admins of its organization): GET
    asks to confirm, says what the action does and takes the reason; POST acts."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
    if action not in NODE_ACTIONS:
        return HttpResponse(status=404)
    vis, node = _operable_node(request, pk)
    if not vis.is_org_admin(node.cluster.organization_id):
        raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
    service, with_reason, done = NODE_ACTIONS[action]
    if request.method != "POST":
        return render(
            request,
            "scheduler/node_action.html",
            {
                "node": node,
                "action": action,
                "label": NODE_ACTION_LABELS[action],
                "effect": NODE_ACTION_EFFECTS[action],
                "with_reason": with_reason,
                "mapped": node_with_work(node=node, vis=vis),
            },
        )
    kwargs = {"reason": request.POST.get("reason", "").strip()[:500]} if with_reason else {}
    try:
        service(node=node, actor=request.user, **kwargs)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{node.name} {done}.")
    return redirect("scheduler:node-detail", pk=node.pk)


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
            "refresh": _live(request),
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
    workload = get_object_or_404(
        visible_workloads(vis)
        .select_related("project", "cluster", "submitted_by")
        .prefetch_related(
            Prefetch(
                "runs",
                queryset=Run.objects.order_by("-attempt").select_related(
                    "preempted_by__project__program"
                ),
            )
        ),
        pk=pk,
    )
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
            "refresh": _live(request),
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


# --- Simulator ----------------------------------------------------------------------------


def _simulating_orgs(vis) -> list[Organization]:
    """Organizations the user manages in (org admin, or manager of one of its programs)."""
    return list(vis.simulating_organizations().order_by("name"))


def _visible_jobs(vis):
    """Simulation jobs the user may open: their own, and any of an org they administer."""
    return SimulationJob.objects.filter(vis.simulations_q()).select_related("created_by", "cluster")


def _simulator_page(request: HttpRequest, vis, orgs, form=None, status=200) -> HttpResponse:
    clusters = list(Cluster.objects.filter(organization__in=orgs).order_by("name"))
    return render(
        request,
        "scheduler/simulator.html",
        {
            "form": form or SimulationForm(clusters=clusters),
            "jobs": list(_visible_jobs(vis)[:10]),
        },
        status=status,
    )


@login_required
@require_safe
def simulator(request: HttpRequest) -> HttpResponse:
    """The simulator form and the user's latest simulations (managers and org admins)."""
    vis = visibility_of(request)
    orgs = _simulating_orgs(vis)
    if not orgs:
        raise PermissionDenied("The simulator is for program managers and org admins.")
    return _simulator_page(request, vis, orgs)


@login_required
@require_POST
def simulation_create(request: HttpRequest) -> HttpResponse:
    """Queue a simulation; bad input (a bad trace row with its line) re-shows the form."""
    vis = visibility_of(request)
    orgs = _simulating_orgs(vis)
    if not orgs:
        raise PermissionDenied("The simulator is for program managers and org admins.")
    clusters = list(Cluster.objects.filter(organization__in=orgs).order_by("name"))
    form = SimulationForm(request.POST, request.FILES, clusters=clusters)
    if not form.is_valid():
        return _simulator_page(request, vis, orgs, form=form, status=400)
    data = form.cleaned_data
    cluster = next((c for c in clusters if c.pk == data["cluster"]), None)
    upload = request.FILES.get("trace_file")
    try:
        job = simulation_job_create(
            user=request.user,
            organization=cluster.organization if cluster else orgs[0],
            trace_source=data["trace_source"],
            gpus=data["gpus"],
            gpus_per_node=data["gpus_per_node"],
            budgets=data["budgets"],
            cluster=cluster,
            policies=data["policies"],
            start_day=data["start_day"],
            days=data["days"],
            # Read at most one byte past the limit: the service refuses it, naming the size.
            upload=upload.read(MAX_UPLOAD_READ) if upload else None,
            upload_name=upload.name if upload else "upload.csv",
        )
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
        return _simulator_page(request, vis, orgs, form=form, status=400)
    messages.success(request, "The simulation is queued; this page shows its progress.")
    return redirect("scheduler:simulation-detail", pk=job.pk)


@login_required
@require_safe
def simulation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One simulation: progress while it runs; then the comparison, delivery and timeline."""
    vis = visibility_of(request)
    job = get_object_or_404(_visible_jobs(vis), pk=pk)
    finished = job.state in (SimulationJobState.DONE, SimulationJobState.FAILED)
    result = job.result if job.state == SimulationJobState.DONE else None
    figures = [
        {**fig, "delivery_id": f"delivery-{i}", "timeline_id": f"timeline-{i}"}
        for i, fig in enumerate((result or {}).get("figures", []), start=1)
    ]
    return render(
        request,
        "scheduler/simulation_detail.html",
        {
            "job": job,
            "finished": finished,
            "refresh": None if finished else 2,
            "result": result,
            "figures": figures,
            "percent": round(100 * job.progress),
        },
    )
