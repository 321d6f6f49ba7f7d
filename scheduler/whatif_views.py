"""What-if pages: a run's progress and, once done, today's tree vs the proposed one per team;
and the "Preview effect" button of an approval request's page.

Thin over ``scheduler.services.whatif`` (asking) and ``scheduler.selectors.whatif`` (what a
viewer sees of a stored run). The split editor's own "Preview effect" is in
``governance.views.split``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from governance.models import Organization, Program, Project
from governance.selectors.tree import shares_at
from governance.views.common import visibility_of
from scheduler.models import SimulationJobState, WhatIfRun
from scheduler.selectors.whatif import TeamEffect, whatif_shown
from scheduler.services.whatif import whatif_create
from scheduler.simulator.durations import format_duration

NODE_MODELS = {"organization": Organization, "program": Program, "project": Project}


@dataclass(frozen=True)
class Cell:
    """One figure of one team, today and proposed, and whether the change is for the better
    (``"better"``), the worse (``"worse"``) or none (``""``)."""

    today: str
    proposed: str
    change: str


def _cell(before, after, fmt, *, higher_is_better: bool) -> Cell:
    def text(v) -> str:
        return "—" if v is None else fmt(v)

    change = ""
    if before is not None and after is not None and text(before) != text(after):
        change = "better" if (after > before) == higher_is_better else "worse"
    return Cell(text(before), text(after), change)


def _gpu_hours(value: float) -> str:
    return f"{value:,.1f}"


def _ratio(value: float) -> str:
    return f"{value:.0%}"


def team_cells(team: TeamEffect) -> list[Cell]:
    """The table's cells of one team, in the template's column order."""
    a, b = team.today, team.proposed
    return [
        _cell(a.owed_gpu_hours, b.owed_gpu_hours, _gpu_hours, higher_is_better=True),
        _cell(
            a.delivered_of_owed_gpu_hours,
            b.delivered_of_owed_gpu_hours,
            _gpu_hours,
            higher_is_better=True,
        ),
        _cell(a.hourly_delivery_ratio, b.hourly_delivery_ratio, _ratio, higher_is_better=True),
        _cell(a.debug_wait_p50, b.debug_wait_p50, format_duration, higher_is_better=False),
        _cell(a.debug_wait_p90, b.debug_wait_p90, format_duration, higher_is_better=False),
        _cell(a.other_wait_p50, b.other_wait_p50, format_duration, higher_is_better=False),
        _cell(a.other_wait_p90, b.other_wait_p90, format_duration, higher_is_better=False),
        _cell(a.preemptions, b.preemptions, "{:,}".format, higher_is_better=False),
    ]


@login_required
@require_safe
def whatif_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One what-if: progress while it runs; then the per-team comparison and its limits."""
    vis = visibility_of(request)
    run = get_object_or_404(
        WhatIfRun.objects.filter(vis.whatif_runs_q()).select_related("cluster", "approval_request"),
        pk=pk,
    )
    parent = NODE_MODELS[run.parent_kind].objects.filter(pk=run.parent_id).first()
    finished = run.state in (SimulationJobState.DONE, SimulationJobState.FAILED)
    shown = whatif_shown(run.result, vis, run.cluster.organization_id) if run.result else None
    rows = []
    if shown is not None:
        teams = [*shown.teams, *([shown.other] if shown.other else [])]
        rows = [{"team": t, "cells": team_cells(t)} for t in teams]
    return render(
        request,
        "scheduler/whatif_detail.html",
        {
            "run": run,
            "parent": parent,
            "changes": _changes(run, vis),
            "finished": finished,
            "refresh": None if finished else 2,
            "percent": round(100 * run.progress),
            "shown": shown,
            "rows": rows,
            "treated": sorted((run.result or {}).get("counts", {}).items()),
            "may_decide": run.approval_request is not None and vis.can_decide(run.approval_request),
        },
    )


def _changes(run: WhatIfRun, vis) -> list[dict]:
    """Each proposed child the viewer sees: its name, its share then and proposed."""
    today = shares_at(cluster=run.cluster, at=run.window_end)
    rows = []
    for ref, percent in run.proposal.items():
        kind, _, pk = ref.partition("-")
        visible = vis.programs() if kind == "program" else vis.projects()
        node = visible.filter(pk=int(pk)).first()
        if node is not None:
            rows.append({"node": node, "today": today.get((kind, node.pk)), "proposed": percent})
    return sorted(rows, key=lambda r: r["node"].name)


@login_required
@require_POST
def whatif_request_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """The "Preview effect" button of a request's page: the change it asks for, replayed."""
    vis = visibility_of(request)
    asked = get_object_or_404(vis.approval_requests().select_related("cluster"), pk=pk)
    try:
        run = whatif_create(
            user=request.user,
            cluster=asked.cluster,
            parent=asked.parent,
            percents={line.node: line.percent for line in asked.lines.all()},
            approval_request=asked,
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("approval-detail", pk=asked.pk)
    return redirect("scheduler:whatif-detail", pk=run.pk)
