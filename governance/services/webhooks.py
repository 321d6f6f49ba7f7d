"""An organization's events posted to its webhook (JSON a chat tool's incoming webhook takes).

``webhook_queue`` is called by ``notifications.notify`` for the organization-wide kinds, once
per event, inside the transaction of the change; a Celery task posts it after the commit.
Like e-mails, a delivery is claimed before the request (a worker that dies mid-request never
posts it twice), an unreachable or failing receiver (network error, 5xx, 429) is retried with
backoff and then marked failed, and failures are listed for the org admin on the webhook's
page. Events of one burst (a rack of nodes going down) fold into the first delivery while it
is queued, and into nothing more for an hour after.

The body: ``{"text": "<title> <link>", "event": {kind, title, body, link, organization,
at, count}}`` — ``text`` is what Slack, Mattermost, Rocket.Chat and Zulip's Slack-compatible
incoming webhooks show.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.choices import DeliveryState, NotificationKind
from governance.models import OrganizationWebhook, WebhookDelivery
from governance.services.deliveries import (
    deliveries_sweep,
    delivery_claim,
    delivery_enqueue,
    delivery_not_sent,
    delivery_sent,
)

# The kinds that concern an organization as a whole (workload events are one person's).
ORG_KINDS = frozenset(
    {
        NotificationKind.APPROVAL_AWAITING,
        NotificationKind.APPROVAL_DECIDED,
        NotificationKind.SHARE_CHANGED,
        NotificationKind.NODE_ATTENTION,
        NotificationKind.TEAM_UNDER_DELIVERED,
        NotificationKind.MONTH_USAGE,
        NotificationKind.REPORT_READY,
    }
)
BURST_WINDOW = timedelta(hours=1)
TIMEOUT_SECONDS = 10


def webhook_queue(*, organization_id: int, notice, now) -> WebhookDelivery | None:
    """Queue ``notice`` for the organization's enabled webhook, once per event; a burst
    (same ``collapse_key`` within an hour) folds into its first delivery."""
    if notice.kind not in ORG_KINDS:
        return None
    hook = OrganizationWebhook.objects.filter(organization_id=organization_id, enabled=True).first()
    if hook is None:
        return None
    if WebhookDelivery.objects.filter(webhook=hook, event_key=notice.event_key[:200]).exists():
        return None
    if notice.collapse_key:
        burst = (
            WebhookDelivery.objects.select_for_update()
            .filter(
                webhook=hook,
                collapse_key=notice.collapse_key[:200],
                created_at__gte=now - BURST_WINDOW,
            )
            .order_by("-created_at")
            .first()
        )
        if burst is not None:
            burst.count += 1
            if burst.state == DeliveryState.QUEUED:  # not posted yet: say how many
                burst.payload = _payload(notice, now, burst.count)
            burst.save(update_fields=["count", "payload"])
            return burst
    delivery = WebhookDelivery.objects.create(
        webhook=hook,
        event_key=notice.event_key[:200],
        collapse_key=notice.collapse_key[:200],
        kind=notice.kind,
        payload=_payload(notice, now, 1),
        created_at=now,
    )
    transaction.on_commit(lambda: _enqueue(delivery.pk), robust=True)
    return delivery


def _payload(notice, now, count: int) -> dict:
    site = settings.SITE_URL.rstrip("/")
    title = (
        notice.burst_title.format(count=count) if count > 1 and notice.burst_title else notice.title
    )
    link = (notice.burst_link or notice.link) if count > 1 else notice.link
    url = f"{site}{link}" if link else ""
    return {
        "text": f"{title} {url}".strip(),
        "event": {
            "kind": str(notice.kind),
            "title": title,
            "body": notice.body,
            "link": url,
            "organization": notice.organization_id,
            "at": now.isoformat(),
            "count": count,
        },
    }


def _enqueue(delivery_id: int) -> None:
    from governance.tasks import webhook_post

    delivery_enqueue(webhook_post, delivery_id, "webhook delivery")


def webhook_delivery_post(*, delivery_id: int, final: bool = False, now=None) -> str:
    """Post one delivery at most once (``services.deliveries``); ``sent``, ``retry``,
    ``failed`` or ``skipped``."""
    now = now or timezone.now()
    delivery = delivery_claim(WebhookDelivery.objects.select_related("webhook"), delivery_id, now)
    if delivery is None:
        return "skipped"
    request = urllib.request.Request(
        delivery.webhook.url,
        data=json.dumps(delivery.payload).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "gpu-governance-webhook"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            response.read(1024)
    except urllib.error.HTTPError as exc:
        # 4xx other than 429: the receiver refuses this body; asking again will not help.
        retry = exc.code >= 500 or exc.code == 429
        error = f"HTTP {exc.code} {exc.reason}"
        return delivery_not_sent(delivery, error, retry=retry and not final)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return delivery_not_sent(delivery, f"{type(exc).__name__}: {exc}", retry=not final)
    return delivery_sent(delivery)


def webhook_set(*, organization, url: str, enabled: bool, actor, now=None) -> OrganizationWebhook:
    """Set (or change) the organization's webhook (the URL already validated: http or https)."""
    hook, _ = OrganizationWebhook.objects.update_or_create(
        organization=organization,
        defaults={
            "url": url,
            "enabled": enabled,
            "updated_by": actor,
            "updated_at": now or timezone.now(),
        },
    )
    return hook


def webhook_deliveries_sweep(*, now=None) -> int:
    """Give up posts claimed too long ago (never posted twice) and post queued ones whose task
    was lost. Returns how many rows were touched."""
    from governance.tasks import webhook_post

    return deliveries_sweep(
        WebhookDelivery,
        webhook_post,
        gave_up="The worker stopped while posting; not posted again, to never post it twice.",
        what="webhook delivery",
        now=now,
    )
