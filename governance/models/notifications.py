"""Messages to people in the notification centre, and who wants which by e-mail."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from governance.choices import EmailChoice, NotificationKind
from governance.models.tree import Organization


class Notification(models.Model):
    """One message to one person in the notification centre (the bell on every page).

    ``event_key`` names the event (``run:42:ended``): one row per recipient and event, so a
    retried task or a repeated call never tells anyone twice. Events of one kind that come
    in a burst fold into one unread row per ``collapse_key`` (a team's preemptions within an
    hour): ``count`` says how many, ``updated_at`` when the last one came, and the title is
    rewritten for the total. Reading a row ends its burst; the next event starts a new one.
    """

    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    kind = models.CharField(max_length=30, choices=NotificationKind.choices)
    organization = models.ForeignKey(
        Organization, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=300, blank=True, help_text="A path inside the site.")
    event_key = models.CharField(max_length=200)
    collapse_key = models.CharField(max_length=200, blank=True)
    count = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["recipient", "event_key"], name="notification_once_per_event"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=NotificationKind.values), name="notification_kind_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["recipient", "read_at", "-updated_at"], name="notification_inbox"),
            models.Index(
                fields=["recipient", "kind", "collapse_key", "read_at"],
                name="notification_burst",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipient} · {self.title}"


class NotificationPreference(models.Model):
    """Whether one person also wants one kind of notification by e-mail (the centre always
    has every kind). No row: the kind's default (``services.notification_mail.EMAIL_DEFAULTS``)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_prefs"
    )
    kind = models.CharField(max_length=30, choices=NotificationKind.choices)
    email = models.CharField(max_length=20, choices=EmailChoice.choices)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "kind"], name="notification_pref_once"),
            models.CheckConstraint(
                condition=Q(email__in=EmailChoice.values), name="notification_pref_email_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.kind}: {self.email}"
