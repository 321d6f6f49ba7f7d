"""The "Preempt now" button of a running workload's page (operators: org admins).

Thin over ``scheduler.services.preemptions.workload_preempt_force``: a workload the user
cannot see is a 404, one they see but may not stop a 403; a missing reason or confirmation,
or a workload that is no longer running, comes back as a message on the workload's page.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from governance.views.common import visibility_of
from scheduler.selectors.workloads import visible_workloads
from scheduler.services.preemptions import MAX_REASON_LENGTH, workload_preempt_force


@login_required
@require_POST
def workload_preempt_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Stop the workload's run now, bypassing its minimum runtime (with a reason)."""
    vis = visibility_of(request)
    workload = get_object_or_404(visible_workloads(vis).select_related("cluster"), pk=pk)
    if not vis.is_org_admin(workload.cluster.organization_id):
        raise PermissionDenied("Only an org admin of this cluster's organization may do this.")
    if request.POST.get("confirm") != "yes":
        messages.error(request, "Tick the confirmation to preempt: the run loses its work.")
        return redirect("scheduler:workload-detail", pk=workload.pk)
    try:
        workload_preempt_force(
            workload=workload,
            actor=request.user,
            reason=request.POST.get("reason", "")[: MAX_REASON_LENGTH + 1],
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request, f"{workload.name} is being stopped; it is requeued once its agents confirm."
        )
    return redirect("scheduler:workload-detail", pk=workload.pk)
