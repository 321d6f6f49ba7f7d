"""Notification e-mails: each person's choice per kind, one e-mail per new notice sent after
the commit (claimed before sending: at most once), the daily digest, and the signed link that
stops a kind (also the one-click ``List-Unsubscribe`` header). See ``docs/notifications.md``.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from governance.choices import DeliveryState, EmailChoice, NotificationKind
from governance.models import EmailDelivery, EmailDigest, Notification, NotificationPreference

logger = logging.getLogger(__name__)

# What each kind does by e-mail until the person chooses: what asks for action or says that
# something went wrong comes at once; routine news stays in the app.
EMAIL_DEFAULTS = {
    NotificationKind.APPROVAL_AWAITING: EmailChoice.IMMEDIATE,
    NotificationKind.APPROVAL_DECIDED: EmailChoice.IMMEDIATE,
    NotificationKind.SHARE_CHANGED: EmailChoice.IMMEDIATE,
    NotificationKind.WORKLOAD_FAILED: EmailChoice.IMMEDIATE,
    NotificationKind.WORKLOAD_PREEMPTED: EmailChoice.DAILY,
    NotificationKind.WORKLOAD_STARTED: EmailChoice.OFF,
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


def email_queue(row: Notification, address: str, now) -> None:
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
