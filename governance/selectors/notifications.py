"""Reads of the notification centre: one person's notices, newest first, and the unread count."""

from __future__ import annotations

from django.db.models import QuerySet

from governance.models import Notification


def notifications_for(*, user, kind: str = "", unread: bool = False) -> QuerySet[Notification]:
    """``user``'s notifications, newest (last event) first; ``kind`` and ``unread`` filter."""
    if user is None or not user.is_authenticated:
        return Notification.objects.none()
    rows = Notification.objects.filter(recipient=user)
    if kind:
        rows = rows.filter(kind=kind)
    if unread:
        rows = rows.filter(read_at__isnull=True)
    return rows.order_by("-updated_at", "-id")


def unread_count(*, user) -> int:
    """How many of ``user``'s notifications are unread (the bell's number)."""
    return notifications_for(user=user, unread=True).count()
