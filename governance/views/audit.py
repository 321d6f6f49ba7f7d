"""The audit trail page (``/audit/``) and its CSV export: org admins, their organizations.

Thin: who sees what is ``governance.selectors.audit``; the filters (action, actor, a range
of days) are a plain form; bad filter input is shown next to its field with a 400 and no
rows. Everyone but an org admin gets the 403 page.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_safe

from governance.choices import AuditAction
from governance.fields import DayFormField
from governance.selectors.audit import (
    AuditFilter,
    audit_diff_rows,
    audit_events_filter,
    audit_events_visible,
    audit_may_view,
)
from governance.views.common import visibility_of

app_name = "audit"

PAGE_SIZE = 50
# A spreadsheet opens a cell starting with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class AuditFilterForm(forms.Form):
    """The page's filters; every field may stay empty."""

    action = forms.ChoiceField(
        choices=[("", "Any action"), *AuditAction.choices], required=False, label="Action"
    )
    actor = forms.CharField(
        required=False, max_length=150, label="Who", help_text='A username, or "system".'
    )
    since = DayFormField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = DayFormField(
        required=False, label="To (included)", widget=forms.DateInput(attrs={"type": "date"})
    )

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and until < since:
            self.add_error("until", "Must be on or after the first day.")
        return data

    def query(self) -> AuditFilter:
        """The validated filters (call after ``is_valid()``)."""
        data = self.cleaned_data
        return AuditFilter(
            action=data.get("action") or "",
            actor=(data.get("actor") or "").strip(),
            since=data.get("since"),
            until=data.get("until"),
        )


def _events(request: HttpRequest):
    """(form, filtered events or None when the filters were refused)."""
    vis = visibility_of(request)
    if not audit_may_view(visibility=vis):
        raise PermissionDenied("The audit trail is for org admins.")
    form = AuditFilterForm(request.GET or None)
    events = audit_events_visible(visibility=vis)
    if form.is_bound:
        if not form.is_valid():
            return form, None
        events = audit_events_filter(events, query=form.query())
    return form, events


def _readable(value) -> str:
    """A stored value as the page shows it: "—" for none, instants in the site's zone."""
    if value is None:
        return "—"
    if isinstance(value, str):
        if len(value) >= 19 and value[4] == "-" and value[10] == "T":
            try:
                instant = datetime.fromisoformat(value)
            except ValueError:
                return value
            if instant.tzinfo is not None:
                return f"{timezone.localtime(instant):%Y-%m-%d %H:%M:%S %Z}"
        return value
    return json.dumps(value, ensure_ascii=False)


def _diff(event) -> list[tuple[str, str, str, bool, bool]]:
    """(key, before, after, before is empty, after is empty) as the page shows them.

    Keys empty on both sides (an open-ended share's ``valid_to``) are left out; percents of
    a share change get their unit.
    """
    rows = []
    for key, before, after in audit_diff_rows(event):
        if before is None and after is None:
            continue
        b, a = _readable(before), _readable(after)
        if event.action == AuditAction.SHARE_CHANGE and key not in ("valid_from", "valid_to"):
            b, a = (f"{v}\u00a0%" if v != "—" else v for v in (b, a))
        rows.append((key.replace("_", " "), b, a, before is None, after is None))
    return rows


@login_required
@require_safe
def audit_events_page(request: HttpRequest) -> HttpResponse:
    """Newest first, 50 a page, each with who, when, what and the values before and after."""
    form, events = _events(request)
    if events is None:
        return render(request, "governance/audit.html", {"form": form, "page": None}, status=400)
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    for event in page.object_list:
        event.diff = _diff(event)
        event.kind_text = event.object_kind.replace("_", " ")
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "governance/audit.html",
        {"form": form, "page": page, "query": query.urlencode()},
    )


def _cell(value) -> str:
    text = _readable(value) if not isinstance(value, str) else value
    return "'" + text if text.startswith(FORMULA_STARTS) else text


@login_required
@require_safe
def audit_events_csv(request: HttpRequest) -> HttpResponse:
    """The filtered events as CSV (one row per event; before/after as JSON)."""
    form, events = _events(request)
    if events is None:
        errors = "; ".join(f"{f}: {' '.join(m)}" for f, m in form.errors.items())
        return HttpResponse(errors, status=400, content_type="text/plain; charset=utf-8")
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        ["at", "actor", "action", "organization", "object_kind", "object_id", "object", "before",
         "after", "reason"]
    )  # fmt: skip
    for e in events.iterator(chunk_size=1000):
        writer.writerow(
            [
                e.at.isoformat(),
                _cell(e.actor_label or "system"),
                e.action,
                _cell(e.organization.name),
                e.object_kind,
                e.object_id,
                _cell(e.object_label),
                _cell(json.dumps(e.before, ensure_ascii=False)),
                _cell(json.dumps(e.after, ensure_ascii=False)),
                _cell(e.reason),
            ]
        )
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    return response


urlpatterns = [
    path("", audit_events_page, name="events"),
    path("export.csv", audit_events_csv, name="export"),
]
