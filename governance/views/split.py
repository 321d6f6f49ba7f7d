"""The split editor: all children of one node, one percent each, saved or sent for approval."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from governance.fields import DayFormField
from governance.forms import SplitForm, SplitRow, start_of_day
from governance.models import Cluster, Organization, Program
from governance.selectors.tree import children_shares, share_at
from governance.services.allocations import allocation_split
from governance.services.approvals import approval_request_create
from governance.views.common import organization_of, visibility_of, visible_node
from scheduler.services.whatif import whatif_create


def _visible_child_ids(vis, parent) -> set[int]:
    queryset = vis.projects() if isinstance(parent, Program) else vis.programs()
    return set(queryset.values_list("id", flat=True))


@dataclass(frozen=True)
class _Editor:
    """What the split editor works on: the node whose children are split, on which cluster,
    from which day, and the rows of the children the user sees."""

    cluster: Cluster
    parent: Organization | Program
    manage: bool  # the user manages the node (saves directly) rather than asks
    day: date | None  # the future day the change starts on; None: today
    rows: list[SplitRow]
    complete: bool  # the user sees every child, so the sum is shown and checked


@login_required
def split_editor(request: HttpRequest, cluster_id: int, kind: str, pk: int) -> HttpResponse:
    """Edit the shares of a node's children on one cluster.

    A manager of the node (``can_manage``) saves directly with ``allocation_split``; someone who
    may only request a change of some children (a PI for their project, a program manager for
    their program's share) sends an approval request with ``approval_request_create``. Seeing
    the node without either right is a 403; not seeing it is a 404.
    """
    editor = _editor(request, cluster_id, kind, pk)
    if request.method == "POST":
        form = SplitForm(request.POST, rows=editor.rows, day=editor.day)
        done = _submit(request, form, editor)
        if done is not None:
            return done
    else:
        form = SplitForm(rows=editor.rows, day=editor.day, initial={"valid_from": editor.day})
    return render(request, "governance/split.html", _context(editor, form, kind))


def _editor(request: HttpRequest, cluster_id: int, kind: str, pk: int) -> _Editor:
    """The node, cluster and rows the request asks for (404 when not visible, 403 when the
    user may neither change nor ask to change any child)."""
    vis = visibility_of(request)
    if kind not in ("organization", "program"):
        raise Http404("Only organizations and programs are split among children.")
    cluster = get_object_or_404(vis.clusters().select_related("organization"), pk=cluster_id)
    parent = visible_node(vis, kind, pk)
    if organization_of(parent).pk != cluster.organization_id:
        raise Http404("This node does not take part in that cluster.")

    manage = vis.can_manage(parent)
    visible_ids = _visible_child_ids(vis, parent)
    # The editor shows the shares in force on the day the change starts (today by default),
    # so a change dated in the future is made against the split it will replace.
    day = _start_day(request.POST if request.method == "POST" else request.GET)
    all_children = children_shares(
        parent=parent, cluster=cluster, at=start_of_day(day) if day else None
    )
    rows = [
        SplitRow(node=child, current=share, editable=manage or vis.can_request(child))
        for child, share in all_children
        if child.pk in visible_ids
    ]
    if not any(row.editable for row in rows):
        raise PermissionDenied(
            f"Your role lets you see how {parent.name} is split, but not change it or ask "
            "for a change."
        )
    return _Editor(
        cluster=cluster,
        parent=parent,
        manage=manage,
        day=day,
        rows=rows,
        complete=len(rows) == len(all_children),
    )


def _submit(request: HttpRequest, form: SplitForm, editor: _Editor) -> HttpResponse | None:
    """Preview, save or send the posted split; None (the editor again, with the form's
    errors) when it cannot be done."""
    parent, cluster = editor.parent, editor.cluster
    if "preview" in request.POST:
        return _preview(request, form, parent, cluster)
    if not form.is_valid():
        return None
    percents = form.percents_to_save()
    start, end = form.window()
    try:
        if editor.manage:
            return _save_split(request, form, parent, cluster, percents, start, end)
        return _send_request(request, form, parent, cluster, percents, start, end)
    except ValidationError as error:
        form.add_service_errors(error)
    return None


def _context(editor: _Editor, form: SplitForm, kind: str) -> dict:
    """The template's context: the rows with their fields and GPUs, and the totals."""
    parent, cluster, rows = editor.parent, editor.cluster, editor.rows
    current_total = sum((row.current for row in rows), Decimal("0"))
    parent_share = (
        share_at(node=parent, cluster=cluster) if isinstance(parent, Program) else Decimal(100)
    )
    parent_gpus = float(parent_share) / 100 * cluster.total_gpus
    table = [
        {
            "row": row,
            "field": form.percent_field(row),
            "gpus": float(row.current) / 100 * parent_gpus,
        }
        for row in rows
    ]
    return {
        "cluster": cluster,
        "parent": parent,
        "kind": kind,
        "form": form,
        "table": table,
        "manage": editor.manage,
        "complete": editor.complete,
        "current_total": current_total,
        "current_rest": max(Decimal(100) - current_total, Decimal(0)),
        "parent_gpus": parent_gpus,
        "parent_share": parent_share,
        "child_word": "projects" if isinstance(parent, Program) else "programs",
        "tree_url": reverse("tree", args=[cluster.pk]),
        "day": editor.day,
    }


def _preview(request, form, parent, cluster) -> HttpResponse | None:
    """ "Preview effect": a what-if of the percents being edited, nothing saved; None (the
    editor again, with the errors) for bad input."""
    form.fields["reason"].required = False  # a preview changes nothing: no reason needed
    if not form.is_valid():
        return None
    try:
        run = whatif_create(
            user=request.user, cluster=cluster, parent=parent, percents=form.changed_percents()
        )
    except ValidationError as error:
        form.add_service_errors(error)
        return None
    return redirect("scheduler:whatif-detail", pk=run.pk)


def _start_day(data) -> date | None:
    """The future day a change starts on, read from ``valid_from`` (None: today, or a value
    the form itself will refuse)."""
    try:
        day = DayFormField(required=False).clean(data.get("valid_from", ""))
    except ValidationError:
        return None
    return day if day and day > timezone.localdate() else None


def _describe(percents: dict, rows_by_pk: dict) -> str:
    return ", ".join(
        f"{node.name} {rows_by_pk[node.pk].current:.2f} % → {value:.2f} %"
        if value != rows_by_pk[node.pk].current
        else f"{node.name} kept at {value:.2f} %"
        for node, value in percents.items()
    )


def _save_split(request, form, parent, cluster, percents, start, end) -> HttpResponse:
    allocation_split(
        actor=request.user,
        parent=parent,
        cluster=cluster,
        percents=percents,
        reason=form.cleaned_data["reason"],
        valid_from=start,
        valid_to=end,
    )
    rows_by_pk = {row.node.pk: row for row in form.rows}
    when = f" from {start:%Y-%m-%d}" if start else ""
    until = f" until {end:%Y-%m-%d}" if end else ""
    messages.success(
        request,
        f"Saved the split of {parent.name} on {cluster.name}{when}{until}: "
        f"{_describe(percents, rows_by_pk)}.",
    )
    url = reverse("tree", args=[cluster.pk])
    if start:
        url += "?" + urlencode({"at": f"{start:%Y-%m-%d}"})
    return redirect(url)


def _send_request(request, form, parent, cluster, percents, start, end) -> HttpResponse:
    approval_request = approval_request_create(
        actor=request.user,
        parent=parent,
        cluster=cluster,
        percents=percents,
        reason=form.cleaned_data["reason"],
        effective_from=start,
        effective_to=end,
    )
    messages.success(
        request,
        f"Request #{approval_request.pk} sent to the managers of {parent.name}. "
        "You will see their decision here.",
    )
    return redirect("approval-detail", pk=approval_request.pk)
