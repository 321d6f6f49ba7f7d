"""Reads of the audit trail: who may see which events, filtered as the page and API ask.

Org admins see the events of their organizations; nobody else sees any (finance reads
usage, not the operators' and managers' acts; a program manager's own acts are in the
approval history of their requests).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from governance.models import AuditEvent
from governance.selectors.visibility import Visibility


def audit_may_view(*, visibility: Visibility) -> bool:
    """True for org admins (of any organization)."""
    return bool(visibility.admin_org_ids)


def audit_events_visible(*, visibility: Visibility) -> QuerySet[AuditEvent]:
    """Every event of the organizations the user administers, newest first."""
    return (
        AuditEvent.objects.filter(organization_id__in=visibility.admin_org_ids)
        .select_related("actor", "organization")
        .order_by("-at", "-id")
    )


@dataclass(frozen=True)
class AuditFilter:
    """What the page or the API narrows the trail to; empty fields do not filter."""

    action: str = ""
    actor: str = ""  # a username, or "system" for events with no actor
    since: date | None = None  # first day, included
    until: date | None = None  # last day, included
    object_kind: str = ""
    object_id: int | None = None


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def audit_events_filter(
    events: QuerySet[AuditEvent], *, query: AuditFilter
) -> QuerySet[AuditEvent]:
    """``events`` narrowed to ``query`` (days are whole days in the site's time zone)."""
    if query.action:
        events = events.filter(action=query.action)
    if query.actor == "system":
        events = events.filter(actor__isnull=True)
    elif query.actor:
        events = events.filter(actor__username=query.actor)
    if query.since:
        events = events.filter(at__gte=_day_start(query.since))
    if query.until and query.until < date.max:  # the last day there is: no upper bound
        events = events.filter(at__lt=_day_start(query.until + timedelta(days=1)))
    if query.object_kind:
        events = events.filter(object_kind=query.object_kind)
    if query.object_id is not None:
        events = events.filter(object_id=query.object_id)
    return events


def audit_diff_rows(event: AuditEvent) -> list[tuple[str, object, object]]:
    """(key, before, after) for every key of either side, in a stable readable order.

    Keys present on one side only show ``None`` on the other (the page prints "—").
    """
    before = event.before if isinstance(event.before, dict) else {}
    after = event.after if isinstance(event.after, dict) else {}
    keys = list(before) + [k for k in after if k not in before]
    return [(key, before.get(key), after.get(key)) for key in keys]
