"""Outgoing messages claimed before they are sent: e-mails, digests, webhook posts."""

from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils import timezone

from governance.choices import DeliveryState, NotificationKind
from governance.models.notifications import Notification
from governance.models.tree import Organization


class DeliveryAttempts(models.Model):
    """How far one outgoing message (an e-mail, a digest, a webhook post) has got: claimed
    before it is sent, so it goes out at most once (``governance.services.deliveries``)."""

    state = models.CharField(
        max_length=20, choices=DeliveryState.choices, default=DeliveryState.QUEUED
    )
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class EmailDelivery(DeliveryAttempts):
    """The e-mail of one notification to its recipient: at most one per notification (a folded
    burst is one e-mail), and at most one send attempt in flight.

    A worker claims the row (``sending``, committed) before it talks to the mail server and
    marks it ``sent`` after; a worker that dies in between leaves ``sending``, which is never
    sent again (``failed`` after a while): nobody gets the same e-mail twice. A refused or
    unreachable server puts it back to ``queued`` for a retry with backoff, then ``failed``.
    """

    notification = models.OneToOneField(
        Notification, on_delete=models.CASCADE, related_name="email_delivery"
    )
    address = models.EmailField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=DeliveryState.values), name="email_delivery_state_valid"
            ),
        ]
        indexes = [models.Index(fields=["state", "claimed_at"], name="email_delivery_state")]

    def __str__(self) -> str:
        return f"{self.address} · {self.state}"


class EmailDigest(DeliveryAttempts):
    """One person's daily digest e-mail: the notices of the kinds they chose as "daily digest"
    since their previous digest. One row per person and day, claimed before it is sent like
    ``EmailDelivery``, so a day's digest goes out at most once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_digests"
    )
    day = models.DateField()
    address = models.EmailField()
    since = models.DateTimeField(help_text="Notices updated after this are in the digest.")
    until = models.DateTimeField()
    notices = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "day"], name="email_digest_once_a_day"),
            models.CheckConstraint(
                condition=Q(state__in=DeliveryState.values), name="email_digest_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.day} · {self.state}"


class OrganizationWebhook(models.Model):
    """Where an organization's events are posted as JSON (a chat tool's incoming webhook):
    requests awaiting a decision and decided, nodes down or drained, teams under-delivered,
    the monthly report. Set by an org admin; one per organization."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, related_name="webhook"
    )
    url = models.URLField(max_length=500)
    enabled = models.BooleanField(default=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return f"{self.organization}: {self.url}"


class WebhookDelivery(DeliveryAttempts):
    """One event posted (or to be posted) to an organization's webhook: at most once per event,
    claimed before the request like ``EmailDelivery``; ``count`` events of one burst fold into
    the first delivery instead of being posted one by one."""

    webhook = models.ForeignKey(
        OrganizationWebhook, on_delete=models.CASCADE, related_name="deliveries"
    )
    event_key = models.CharField(max_length=200)
    collapse_key = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=30, choices=NotificationKind.choices)
    payload = models.JSONField(encoder=DjangoJSONEncoder)
    count = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["webhook", "event_key"], name="webhook_once_per_event"),
            models.CheckConstraint(
                condition=Q(state__in=DeliveryState.values), name="webhook_delivery_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.webhook_id} · {self.kind} · {self.state}"
