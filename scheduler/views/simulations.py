"""The simulator pages: managers and org admins replay a trace in the background and follow
its progress to the comparison of policies."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from governance.models import Cluster, Organization
from governance.views.common import visibility_of
from scheduler.forms import SimulationForm
from scheduler.models import SimulationJob, SimulationJobState
from scheduler.services.simulations import MAX_UPLOAD_BYTES, simulation_job_create

MAX_UPLOAD_READ = MAX_UPLOAD_BYTES + 1


def _simulating_orgs(vis) -> list[Organization]:
    """Organizations the user manages in (org admin, or manager of one of its programs);
    ``PermissionDenied`` for a user who manages in none (the simulator is not theirs)."""
    orgs = list(vis.simulating_organizations().order_by("name"))
    if not orgs:
        raise PermissionDenied("The simulator is for program managers and org admins.")
    return orgs


def _visible_jobs(vis):
    """Simulation jobs the user may open: their own, and any of an org they administer."""
    return SimulationJob.objects.filter(vis.simulations_q()).select_related("created_by", "cluster")


def _simulator_page(request: HttpRequest, vis, orgs, form=None, status=200) -> HttpResponse:
    """The simulator form (blank, or ``form`` with its errors) and the latest jobs."""
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
    return _simulator_page(request, vis, _simulating_orgs(vis))


@login_required
@require_POST
def simulation_create(request: HttpRequest) -> HttpResponse:
    """Queue a simulation; bad input (a bad trace row with its line) re-shows the form."""
    vis = visibility_of(request)
    orgs = _simulating_orgs(vis)
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
            wake_at_timers=data["wake_at_timers"],
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
