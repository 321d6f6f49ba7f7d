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

E-mail (``notification_mail``): a kind the recipient wants by e-mail gets one
``EmailDelivery`` per new notice (a folded event sends nothing more); the organization's
webhook (``webhooks``) gets the organization-wide kinds once per event.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from governance.choices import EmailChoice, NotificationKind, Role
from governance.models import ApprovalRequest, Notification, RoleAssignment
from governance.services.notification_mail import email_choice, email_queue

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
    count: int = 1  # events this notice stands for (a cycle's starts of one project)


def notify(*, recipients: Iterable, notice: Notice, now: datetime | None = None) -> int:
    """Tell each user of ``recipients`` about ``notice`` once; returns the rows written or
    folded. Inactive users and duplicates are skipped."""
    now = now or timezone.now()
    if notice.organization_id is not None:
        from governance.services.webhooks import webhook_queue

        webhook_queue(organization_id=notice.organization_id, notice=notice, now=now)
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
        row = Notification.objects.create(
            recipient=user,
            kind=notice.kind,
            organization_id=notice.organization_id,
            title=notice.title[:300],
            body=notice.body,
            link=notice.link[:300],
            event_key=notice.event_key[:200],
            collapse_key=notice.collapse_key[:200],
            count=notice.count,
            created_at=now,
            updated_at=now,
        )
        if user.email and email_choice(user=user, kind=notice.kind) == EmailChoice.IMMEDIATE:
            email_queue(row, user.email, now)
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
    burst.count += notice.count
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


# --- shares -----------------------------------------------------------------------------------


def share_change_notify(
    *,
    actor,
    cluster,
    before: dict,
    after: dict,
    valid_from,
    valid_to,
    reason: str,
    now,
    requester=None,
) -> None:
    """Tell the people whose project a change of shares affects: a project's PIs when its
    share changes; a program's managers and its projects' PIs when the program's does (their
    effective share moves with it). Not the person who made the change, nor the one who asked
    for it (``requester``: they are told their request was applied)."""
    from governance.models import Program, Project

    when = timezone.localtime(valid_from).strftime("%Y-%m-%d %H:%M")
    until = f" until {timezone.localtime(valid_to):%Y-%m-%d %H:%M}" if valid_to else ""
    for node, percent in after.items():
        old = before.get(node)
        if old is not None and Decimal(old) == Decimal(percent):
            continue
        if isinstance(node, Project):
            scope = Q(role=Role.PI, project=node)
        elif isinstance(node, Program):
            scope = Q(role=Role.PROGRAM_MANAGER, program=node) | Q(
                role=Role.PI, project__in=Project.objects.filter(program=node)
            )
        else:
            continue
        ids = RoleAssignment.objects.filter(scope).values_list("user_id", flat=True)
        users = get_user_model().objects.filter(pk__in=ids, is_active=True).order_by("pk")
        for skipped in (actor, requester):
            if skipped is not None:
                users = users.exclude(pk=skipped.pk)
        was = "no share" if old is None else f"{_percent(old)} %"
        notify(
            recipients=users,
            notice=Notice(
                kind=NotificationKind.SHARE_CHANGED,
                title=(
                    f"{node.name}'s share on {cluster.name} changes from {was} to "
                    f"{_percent(percent)} % from {when}{until}"
                ),
                body=reason,
                link=reverse("tree", args=[cluster.pk]),
                organization_id=cluster.organization_id,
                event_key=f"share:{cluster.pk}:{type(node).__name__}:{node.pk}:{valid_from.isoformat()}",
            ),
            now=now,
        )


def _percent(value) -> str:
    """55.00 as "55", 50.50 as "50.5"."""
    return f"{Decimal(value).normalize():f}"


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
