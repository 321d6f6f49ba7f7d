"""Notification e-mails: each person's choice per kind, one e-mail per new notice sent after
the commit (claimed before sending: at most once), the daily digest, and the signed link that
stops a kind (also the one-click ``List-Unsubscribe`` header). See ``docs/notifications.md``.
"""

from __future__ import annotations

import smtplib
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import EmailMessage
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from governance.choices import DeliveryState, EmailChoice, NotificationKind
from governance.models import EmailDelivery, EmailDigest, Notification, NotificationPreference
from governance.services.deliveries import (
    deliveries_sweep,
    delivery_claim,
    delivery_enqueue,
    delivery_not_sent,
    delivery_sent,
)

# What each kind does by e-mail until the person chooses: what asks for action or says that
# something went wrong comes at once; routine news stays in the app.
EMAIL_DEFAULTS = {
    NotificationKind.APPROVAL_AWAITING: EmailChoice.IMMEDIATE,
    NotificationKind.APPROVAL_DECIDED: EmailChoice.IMMEDIATE,
    NotificationKind.SHARE_CHANGED: EmailChoice.IMMEDIATE,
    NotificationKind.WORKLOAD_FAILED: EmailChoice.IMMEDIATE,
    # Held GPUs others wait for: the owner is asked to act.
    NotificationKind.WORKLOAD_IDLE: EmailChoice.IMMEDIATE,
    NotificationKind.WORKLOAD_PREEMPTED: EmailChoice.DAILY,
    NotificationKind.WORKLOAD_STARTED: EmailChoice.OFF,
    NotificationKind.WORKLOAD_FINISHED: EmailChoice.OFF,
    NotificationKind.NODE_ATTENTION: EmailChoice.IMMEDIATE,
    # The monthly e-mail itself carries the report: the notice stays in the app.
    NotificationKind.REPORT_READY: EmailChoice.OFF,
    NotificationKind.TEAM_UNDER_DELIVERED: EmailChoice.IMMEDIATE,
    NotificationKind.MONTH_USAGE: EmailChoice.IMMEDIATE,
}
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
    """Queue the e-mail of a new notice; its task runs once the change commits."""
    delivery = EmailDelivery.objects.create(notification=row, address=address, created_at=now)
    transaction.on_commit(lambda: _email_enqueue(delivery.pk), robust=True)


def _email_enqueue(delivery_id: int) -> None:
    from governance.tasks import notification_email_send

    delivery_enqueue(notification_email_send, delivery_id, "notification e-mail")


def email_delivery_send(*, delivery_id: int, final: bool = False, now=None) -> str:
    """Send one notification e-mail at most once (``services.deliveries``); returns ``sent``,
    ``retry``, ``failed`` or ``skipped`` (not queued any more). A server that refuses the
    connection or is away releases it for a retry (``final``: failed instead); a refused
    address fails at once."""
    now = now or timezone.now()
    queryset = EmailDelivery.objects.select_related("notification__recipient")
    delivery = delivery_claim(queryset, delivery_id, now)
    if delivery is None:
        return "skipped"
    try:
        _email_message(delivery.notification, delivery.address).send(fail_silently=False)
    except (smtplib.SMTPException, OSError) as exc:
        refused = isinstance(exc, smtplib.SMTPRecipientsRefused)
        error = f"{type(exc).__name__}: {exc}"
        return delivery_not_sent(delivery, error, retry=not (final or refused))
    return delivery_sent(delivery)


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
    """Give up e-mails claimed too long ago (never resent) and send queued ones whose task was
    lost. Returns how many rows were touched."""
    from governance.tasks import notification_email_send

    return deliveries_sweep(
        EmailDelivery,
        notification_email_send,
        gave_up="The worker stopped while sending; not sent again, to never send it twice.",
        what="notification e-mail",
        now=now,
    )


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
        delivery_not_sent(digest, f"{type(exc).__name__}: {exc}", retry=not refused)
        return False
    delivery_sent(digest)
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
