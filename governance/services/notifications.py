"""Writes of the notification centre: who is told what, once per event, bursts folded.

Every notice is written inside the transaction of the state change it reports (a request
decided, a run ended): that change happens once (row locks and compare-and-set in the
callers), so the notice is written once, and a rolled-back change leaves no notice behind.
``event_key`` is unique per recipient as a second guard. Recipients come from the roles and
the visibility selector: nobody is told about work they may not see, and a name they may
not see is replaced by "another project".

A burst of one kind for one recipient and ``collapse_key`` (a team's preemptions) within
``BURST_WINDOW`` of the first unread notice folds into it: one line saying how many, not a
thousand.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from governance.choices import NotificationKind, Role
from governance.models import ApprovalRequest, Notification, RoleAssignment

BURST_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class Notice:
    """One event to tell: what, where to look, and how a burst of it reads.

    ``burst_title`` is a format string with ``{count}`` for a folded burst (empty: never
    folded); ``burst_link`` where a burst points (default ``link``).
    """

    kind: NotificationKind
    title: str
    event_key: str
    body: str = ""
    link: str = ""
    organization_id: int | None = None
    collapse_key: str = ""
    burst_title: str = ""
    burst_link: str = ""


def notify(*, recipients: Iterable, notice: Notice, now: datetime | None = None) -> int:
    """Tell each user of ``recipients`` about ``notice`` once; returns the rows written or
    folded. Inactive users and duplicates are skipped."""
    now = now or timezone.now()
    told = 0
    seen: set[int] = set()
    for user in recipients:
        if user is None or user.pk in seen or not user.is_active:
            continue
        seen.add(user.pk)
        if Notification.objects.filter(recipient=user, event_key=notice.event_key).exists():
            continue
        if notice.collapse_key and notice.burst_title and _fold(user, notice, now):
            told += 1
            continue
        Notification.objects.create(
            recipient=user,
            kind=notice.kind,
            organization_id=notice.organization_id,
            title=notice.title[:300],
            body=notice.body,
            link=notice.link[:300],
            event_key=notice.event_key[:200],
            collapse_key=notice.collapse_key[:200],
            created_at=now,
            updated_at=now,
        )
        told += 1
    return told


def _fold(user, notice: Notice, now: datetime) -> bool:
    """Fold ``notice`` into the recipient's open burst of the same kind and key, if any."""
    burst = (
        Notification.objects.select_for_update()
        .filter(
            recipient=user,
            kind=notice.kind,
            collapse_key=notice.collapse_key[:200],
            read_at__isnull=True,
            created_at__gte=now - BURST_WINDOW,
        )
        .order_by("-created_at")
        .first()
    )
    if burst is None:
        return False
    burst.count += 1
    burst.title = notice.burst_title.format(count=burst.count)[:300]
    burst.body = f"Latest: {notice.title}" + (f" — {notice.body}" if notice.body else "")
    burst.link = (notice.burst_link or notice.link)[:300]
    burst.updated_at = now
    burst.save(update_fields=["count", "title", "body", "link", "updated_at"])
    return True


def notifications_mark_read(*, user, ids: Iterable[int] | None = None, now=None) -> int:
    """Mark ``user``'s notifications read (``ids``: these only; None: all). Returns how many
    changed; ids of other people's notifications change nothing."""
    rows = Notification.objects.filter(recipient=user, read_at__isnull=True)
    if ids is not None:
        rows = rows.filter(pk__in=list(ids))
    return rows.update(read_at=now or timezone.now())


def notifications_settle(*, kind: str, event_prefix: str, now=None) -> int:
    """Mark read, for everyone, the unread notices of ``kind`` whose event key starts with
    ``event_prefix``: what they asked someone to act on is settled (a request decided by
    another manager, or withdrawn)."""
    return Notification.objects.filter(
        kind=kind, event_key__startswith=event_prefix, read_at__isnull=True
    ).update(read_at=now or timezone.now())


# --- who decides a request -------------------------------------------------------------------


def request_deciders(approval_request: ApprovalRequest):
    """The users who may decide ``approval_request``: org admins of its organization and
    program managers of its program, never its requester."""
    scope = Q(role=Role.ORG_ADMIN, organization_id=approval_request.organization_id)
    if approval_request.program_id is not None:
        scope |= Q(role=Role.PROGRAM_MANAGER, program_id=approval_request.program_id)
    user_ids = RoleAssignment.objects.filter(scope).values_list("user_id", flat=True)
    return (
        get_user_model()
        .objects.filter(pk__in=user_ids, is_active=True)
        .exclude(pk=approval_request.requested_by_id)
        .order_by("pk")
    )
