"""At-most-once sending, shared by notification e-mails, digests and webhook posts.

A row (``models.DeliveryAttempts``) is claimed — ``sending``, committed — before the outside
world is called; then marked ``sent``, or released to ``queued`` for a retry, or ``failed``.
A worker that dies in between leaves it claimed: the sweep gives it up after a while and it
is never sent again, so nobody gets the same message twice. Queued rows whose task was lost
(the broker was away) are handed to their task again by the sweep.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from governance.choices import DeliveryState

logger = logging.getLogger(__name__)

# A claimed row whose worker has not finished it after this long is given up.
SENDING_GIVES_UP_AFTER = timedelta(minutes=10)
# A queued row older than this (or released for a retry longer ago than the longest backoff,
# an hour) has lost its task.
QUEUED_RESENT_AFTER = timedelta(minutes=5)
LONGEST_BACKOFF = timedelta(hours=1)


def delivery_claim(queryset, pk: int, now):
    """Claim the queued row ``pk`` of ``queryset`` for sending; None when it is not queued
    any more (sent, given up, or taken by another worker)."""
    with transaction.atomic():
        row = (
            queryset.select_for_update(skip_locked=True, of=("self",))
            .filter(pk=pk, state=DeliveryState.QUEUED)
            .first()
        )
        if row is None:
            return None
        row.state = DeliveryState.SENDING
        row.attempts += 1
        row.claimed_at = now
        row.save(update_fields=["state", "attempts", "claimed_at"])
    return row


def delivery_sent(row) -> str:
    """Mark a claimed row sent."""
    type(row).objects.filter(pk=row.pk).update(state=DeliveryState.SENT, sent_at=timezone.now())
    return "sent"


def delivery_not_sent(row, error: str, *, retry: bool) -> str:
    """Release a claimed row for a retry (``retry``), or mark it failed; say which."""
    type(row).objects.filter(pk=row.pk).update(
        state=DeliveryState.QUEUED if retry else DeliveryState.FAILED, last_error=error[:2000]
    )
    return "retry" if retry else "failed"


def delivery_enqueue(task, pk: int, what: str) -> None:
    """Hand row ``pk`` to its Celery ``task``; with the broker away the sweep does it later."""
    try:
        task.delay(pk)
    except Exception:
        logger.warning("Could not queue %s %s; the sweep will", what, pk)


def deliveries_sweep(model, task, *, gave_up: str, what: str, now=None) -> int:
    """Give up ``model`` rows claimed too long ago (``gave_up`` says why, on the row) and hand
    queued ones whose task was lost to ``task`` again. Returns how many rows were touched."""
    now = now or timezone.now()
    given_up = model.objects.filter(
        state=DeliveryState.SENDING, claimed_at__lt=now - SENDING_GIVES_UP_AFTER
    ).update(state=DeliveryState.FAILED, last_error=gave_up)
    lost = list(
        model.objects.filter(state=DeliveryState.QUEUED)
        .filter(
            Q(attempts=0, created_at__lt=now - QUEUED_RESENT_AFTER)
            | Q(claimed_at__lt=now - LONGEST_BACKOFF - QUEUED_RESENT_AFTER)
        )
        .values_list("pk", flat=True)[:1000]
    )
    for pk in lost:
        delivery_enqueue(task, pk, what)
    return given_up + len(lost)
