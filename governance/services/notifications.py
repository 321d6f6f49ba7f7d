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

E-mail: a kind the recipient wants by e-mail (``NotificationPreference``, else
``EMAIL_DEFAULTS``) gets one ``EmailDelivery`` per new notice (a folded event sends nothing
more), sent by a Celery task once the change commits. Each e-mail carries a signed link
that stops e-mails of its kind, also as the one-click ``List-Unsubscribe`` header.
"""

from __future__ import annotations

import logging
import smtplib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from governance.choices import DeliveryState, EmailChoice, NotificationKind, Role
from governance.models import (
    ApprovalRequest,
    EmailDelivery,
    EmailDigest,
    Notification,
    NotificationPreference,
    RoleAssignment,
)

logger = logging.getLogger(__name__)

BURST_WINDOW = timedelta(hours=1)
# What each kind does by e-mail until the person chooses: what asks for action or says that
# something went wrong comes at once; routine news stays in the app.
EMAIL_DEFAULTS = {
    NotificationKind.APPROVAL_AWAITING: EmailChoice.IMMEDIATE,
    NotificationKind.APPROVAL_DECIDED: EmailChoice.IMMEDIATE,
    NotificationKind.SHARE_CHANGED: EmailChoice.IMMEDIATE,
    NotificationKind.WORKLOAD_FAILED: EmailChoice.IMMEDIATE,
    NotificationKind.WORKLOAD_PREEMPTED: EmailChoice.DAILY,
    NotificationKind.WORKLOAD_FINISHED: EmailChoice.OFF,
    NotificationKind.NODE_ATTENTION: EmailChoice.IMMEDIATE,
    # The monthly e-mail itself carries the report: the notice stays in the app.
    NotificationKind.REPORT_READY: EmailChoice.OFF,
    NotificationKind.TEAM_UNDER_DELIVERED: EmailChoice.IMMEDIATE,
    NotificationKind.MONTH_USAGE: EmailChoice.IMMEDIATE,
}
# A claimed e-mail whose worker has not marked it sent after this long is given up (never
# resent: the server may have taken it before the worker died).
SENDING_GIVES_UP_AFTER = timedelta(minutes=10)
# A queued e-mail older than this has lost its task (the broker was away): the sweep sends it.
QUEUED_RESENT_AFTER = timedelta(minutes=5)
UNSUBSCRIBE_SALT = "governance.notifications.unsubscribe"
# Daily digests go out at the first beat at or after this hour, in the site's time zone.
DIGEST_HOUR = 7
# A first digest covers at most this much (a person who just chose "daily").
DIGEST_FIRST_SPAN = timedelta(days=1)


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
            created_at=now,
            updated_at=now,
        )
        if user.email and email_choice(user=user, kind=notice.kind) == EmailChoice.IMMEDIATE:
            _email_queue(row, user.email, now)
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


# --- e-mail ---------------------------------------------------------------------------------


def email_choice(*, user, kind: str) -> str:
    """Whether ``user`` wants ``kind`` by e-mail: their choice, else the kind's default."""
    chosen = (
        NotificationPreference.objects.filter(user=user, kind=kind)
        .values_list("email", flat=True)
        .first()
    )
    return chosen or EMAIL_DEFAULTS.get(kind, EmailChoice.OFF)


def notification_prefs(*, user) -> dict[str, str]:
    """Every kind with ``user``'s e-mail choice (defaults filled in), in the kinds' order."""
    chosen = dict(NotificationPreference.objects.filter(user=user).values_list("kind", "email"))
    return {kind: chosen.get(kind, EMAIL_DEFAULTS[kind]) for kind in NotificationKind.values}


def notification_prefs_set(*, user, choices: dict[str, str], now=None) -> None:
    """Store ``user``'s e-mail choice per kind (kinds and choices already validated)."""
    now = now or timezone.now()
    for kind, email in choices.items():
        NotificationPreference.objects.update_or_create(
            user=user, kind=kind, defaults={"email": email, "updated_at": now}
        )


def unsubscribe_token(*, user, kind: str) -> str:
    """A signed token that stops e-mails of ``kind`` for ``user`` (no expiry: it is in mails)."""
    return signing.dumps({"u": user.pk, "k": kind}, salt=UNSUBSCRIBE_SALT, compress=True)


def unsubscribe_read(token: str) -> tuple[object, str] | None:
    """The (user, kind) a token stands for, or None when it is not one of ours."""
    try:
        data = signing.loads(token, salt=UNSUBSCRIBE_SALT)
        user = get_user_model().objects.get(pk=int(data["u"]), is_active=True)
        kind = str(data["k"])
    except (signing.BadSignature, KeyError, TypeError, ValueError, OverflowError):
        return None
    except get_user_model().DoesNotExist:
        return None
    return (user, kind) if kind in NotificationKind.values else None


def unsubscribe_url(*, user, kind: str) -> str:
    """The absolute link of an e-mail's footer and ``List-Unsubscribe`` header."""
    token = unsubscribe_token(user=user, kind=kind)
    return settings.SITE_URL.rstrip("/") + reverse("notifications-unsubscribe", args=[token])


def _email_queue(row: Notification, address: str, now) -> None:
    delivery = EmailDelivery.objects.create(notification=row, address=address, created_at=now)
    transaction.on_commit(lambda: _email_enqueue(delivery.pk), robust=True)


def _email_enqueue(delivery_id: int) -> None:
    from governance.tasks import notification_email_send

    try:
        notification_email_send.delay(delivery_id)
    except Exception:  # the broker is away: the sweep sends it later
        logger.warning("Could not queue notification e-mail %s; the sweep will", delivery_id)


def email_delivery_send(*, delivery_id: int, final: bool = False, now=None) -> str:
    """Send one notification e-mail at most once; returns ``sent``, ``retry``, ``failed`` or
    ``skipped`` (not queued any more: sent, given up, or taken by another worker).

    Claims the row (``sending``, committed) before talking to the mail server, so a worker
    that dies mid-send leaves it claimed and nobody sends it again. A server that refuses or
    cannot be reached releases it for a retry (``final``: mark it failed instead).
    """
    now = now or timezone.now()
    with transaction.atomic():
        delivery = (
            EmailDelivery.objects.select_for_update(skip_locked=True)
            .select_related("notification__recipient")
            .filter(pk=delivery_id, state=DeliveryState.QUEUED)
            .first()
        )
        if delivery is None:
            return "skipped"
        delivery.state = DeliveryState.SENDING
        delivery.attempts += 1
        delivery.claimed_at = now
        delivery.save(update_fields=["state", "attempts", "claimed_at"])
    row = delivery.notification
    try:
        _email_message(row, delivery.address).send(fail_silently=False)
    except (smtplib.SMTPException, OSError) as exc:
        refused = isinstance(exc, smtplib.SMTPRecipientsRefused)
        state = DeliveryState.FAILED if final or refused else DeliveryState.QUEUED
        EmailDelivery.objects.filter(pk=delivery.pk).update(
            state=state, last_error=f"{type(exc).__name__}: {exc}"[:2000]
        )
        return "failed" if state == DeliveryState.FAILED else "retry"
    EmailDelivery.objects.filter(pk=delivery.pk).update(
        state=DeliveryState.SENT, sent_at=timezone.now()
    )
    return "sent"


def _email_message(row: Notification, address: str) -> EmailMessage:
    stop = unsubscribe_url(user=row.recipient, kind=row.kind)
    site = settings.SITE_URL.rstrip("/")
    lines = [row.title, ""]
    if row.body:
        lines += [row.body, ""]
    if row.link:
        lines += [f"Open it: {site}{row.link}", ""]
    lines += [
        "--",
        f'You get e-mails for "{row.get_kind_display()}" (set in your notification settings).',
        f"Stop these e-mails: {stop}",
        f"All your notification settings: {site}{reverse('notification-preferences')}",
    ]
    return EmailMessage(
        subject=row.title[:200],
        body="\n".join(lines),
        to=[address],
        headers={
            "List-Unsubscribe": f"<{stop}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "Auto-Submitted": "auto-generated",
        },
    )


def email_deliveries_sweep(*, now=None) -> int:
    """Give up e-mails claimed too long ago (their worker died: never resent) and send queued
    ones whose task was lost. Returns how many rows were touched."""
    now = now or timezone.now()
    given_up = EmailDelivery.objects.filter(
        state=DeliveryState.SENDING, claimed_at__lt=now - SENDING_GIVES_UP_AFTER
    ).update(
        state=DeliveryState.FAILED,
        last_error="The worker stopped while sending; not sent again, to never send it twice.",
    )
    # Never sent and queued a while ago, or released for a retry whose task should long have
    # run (the longest backoff is an hour): their task was lost.
    lost = list(
        EmailDelivery.objects.filter(state=DeliveryState.QUEUED)
        .filter(
            Q(attempts=0, created_at__lt=now - QUEUED_RESENT_AFTER)
            | Q(claimed_at__lt=now - timedelta(hours=1) - QUEUED_RESENT_AFTER)
        )
        .values_list("pk", flat=True)[:1000]
    )
    for delivery_id in lost:
        _email_enqueue(delivery_id)
    return given_up + len(lost)


def email_digests_send(*, now=None) -> int:
    """Send each person their daily digest: the unread notices of the kinds they get "in a
    daily digest", updated since their previous digest. Returns how many digests were sent.

    Run by beat every hour; does nothing before ``DIGEST_HOUR`` (site time) and sends each
    person at most one digest a day: the day's ``EmailDigest`` row is created claimed, so a
    second run, a retry or a second beat finds it and sends nothing. A digest the mail server
    refused the connection for is released and retried at the next run of the same day.
    """
    now = now or timezone.now()
    local = timezone.localtime(now)
    if local.hour < DIGEST_HOUR:
        return 0
    day = local.date()
    recent = now - DIGEST_FIRST_SPAN - timedelta(days=1)
    recipients = (
        Notification.objects.filter(read_at__isnull=True, updated_at__gt=recent)
        .values_list("recipient_id", flat=True)
        .distinct()
    )
    users = get_user_model().objects.filter(pk__in=list(recipients), is_active=True)
    sent = 0
    for user in users.exclude(email="").order_by("pk"):
        kinds = [k for k, v in notification_prefs(user=user).items() if v == EmailChoice.DAILY]
        if kinds and _digest_one(user, kinds, day, now):
            sent += 1
    return sent


def _digest_one(user, kinds: list[str], day, now) -> bool:
    previous = (
        EmailDigest.objects.filter(user=user, day__lt=day, state=DeliveryState.SENT)
        .order_by("-day")
        .first()
    )
    since = previous.until if previous else now - DIGEST_FIRST_SPAN
    rows = list(
        Notification.objects.filter(
            recipient=user, kind__in=kinds, read_at__isnull=True,
            updated_at__gt=since, updated_at__lte=now,
        ).order_by("kind", "-updated_at")[:200]
    )  # fmt: skip
    if not rows:
        return False
    with transaction.atomic():
        digest, created = EmailDigest.objects.select_for_update().get_or_create(
            user=user,
            day=day,
            defaults={"address": user.email, "since": since, "until": now},
        )
        if not created and digest.state != DeliveryState.QUEUED:
            return False  # sent, being sent, or given up today
        digest.state = DeliveryState.SENDING
        digest.attempts += 1
        digest.claimed_at = now
        digest.until = now
        digest.notices = len(rows)
        digest.save(update_fields=["state", "attempts", "claimed_at", "until", "notices"])
    try:
        _digest_message(user, rows, kinds).send(fail_silently=False)
    except (smtplib.SMTPException, OSError) as exc:
        refused = isinstance(exc, smtplib.SMTPRecipientsRefused)
        EmailDigest.objects.filter(pk=digest.pk).update(
            state=DeliveryState.FAILED if refused else DeliveryState.QUEUED,
            last_error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        return False
    EmailDigest.objects.filter(pk=digest.pk).update(
        state=DeliveryState.SENT, sent_at=timezone.now()
    )
    return True


def _digest_message(user, rows: list[Notification], kinds: list[str]) -> EmailMessage:
    site = settings.SITE_URL.rstrip("/")
    lines = [f"{len(rows)} notification{'s' * (len(rows) != 1)} since your last digest:", ""]
    current = None
    for row in rows:
        if row.kind != current:
            current = row.kind
            lines += [
                "",
                NotificationKind(row.kind).label,
                "-" * len(NotificationKind(row.kind).label),
            ]
        when = timezone.localtime(row.updated_at).strftime("%Y-%m-%d %H:%M")
        lines.append(f"- {row.title} ({when})")
        if row.link:
            lines.append(f"  {site}{row.link}")
    lines += ["", "--", f"All of them, read or not: {site}{reverse('notifications')}"]
    for kind in kinds:
        stop = unsubscribe_url(user=user, kind=kind)
        lines.append(f'Stop e-mails about "{NotificationKind(kind).label}": {stop}')
    lines.append(f"All your notification settings: {site}{reverse('notification-preferences')}")
    return EmailMessage(
        subject=f"Your daily digest: {len(rows)} notification{'s' * (len(rows) != 1)}",
        body="\n".join(lines),
        to=[user.email],
        headers={"Auto-Submitted": "auto-generated"},
    )


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
