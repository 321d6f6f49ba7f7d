"""Celery tasks of the budget domain: thin wrappers that take ids and call one service."""

from celery import shared_task


@shared_task(acks_late=True)
def allocations_apply_due() -> int:
    """Apply approved allocation changes whose effective date has arrived; return how many.

    Run by beat every ``ALLOCATIONS_APPLY_EVERY_SECONDS``. Idempotent: a retried or
    duplicated run re-reads each request's state under lock, so nothing applies twice.
    """
    from governance.services.approvals import approvals_apply_due

    return approvals_apply_due()


@shared_task(
    acks_late=True,
    autoretry_for=(OSError,),
    retry_backoff=60,
    retry_backoff_max=3600,
    max_retries=10,
)
def reports_send_monthly() -> int:
    """E-mail last month's usage report (XLSX attached) to each organization's finance users.

    Run by beat on the first day of each month. Idempotent per organization and month (a
    ``MonthlyReportDelivery`` row is written with each sending), so a retry after a mail
    server error sends only what was not sent. Returns how many mails went out.
    """
    from governance.services.reports import report_monthly_send

    return len(report_monthly_send())


@shared_task(acks_late=True)
def usage_days_refresh() -> int:
    """Roll every cluster's closed days into the daily usage cache; return the days added.

    Idempotent and cheap when there is nothing to do. Reports also call it before reading,
    so the cache is current even when no beat entry runs this.
    """
    from governance.services.reports import usage_days_refresh_all

    return usage_days_refresh_all()


@shared_task(acks_late=True, bind=True, max_retries=8)
def notification_email_send(self, delivery_id: int) -> str:
    """Send one notification's e-mail (``services.notification_mail.email_delivery_send``).

    A mail server that refuses or cannot be reached puts the e-mail back in the queue; it is
    retried with backoff (1 min, doubling, at most 1 h), then marked failed. A worker that dies
    mid-send never sends it twice: see ``EmailDelivery``.
    """
    from governance.services.notification_mail import email_delivery_send

    state = email_delivery_send(
        delivery_id=delivery_id, final=self.request.retries >= self.max_retries
    )
    if state == "retry":
        raise self.retry(countdown=min(3600, 60 * 2**self.request.retries))
    return state


@shared_task(acks_late=True)
def notification_emails_sweep() -> int:
    """Fail e-mails and webhook posts stuck mid-send and send queued ones whose task was lost;
    return how many were touched. Run by beat every 5 minutes."""
    from governance.services.notification_mail import email_deliveries_sweep
    from governance.services.webhooks import webhook_deliveries_sweep

    return email_deliveries_sweep() + webhook_deliveries_sweep()


@shared_task(acks_late=True)
def notification_digests_send() -> int:
    """Send the daily digests that are due (at most one per person and day); return how
    many. Run by beat every hour."""
    from governance.services.notification_mail import email_digests_send

    return email_digests_send()


@shared_task(acks_late=True, bind=True, max_retries=8)
def webhook_post(self, delivery_id: int) -> str:
    """Post one event to its organization's webhook (``services.webhooks``); a receiver that
    is away or answers 5xx/429 is retried with backoff (1 min, doubling, at most 1 h), then
    the delivery is marked failed and listed for the org admin."""
    from governance.services.webhooks import webhook_delivery_post

    state = webhook_delivery_post(
        delivery_id=delivery_id, final=self.request.retries >= self.max_retries
    )
    if state == "retry":
        raise self.retry(countdown=min(3600, 60 * 2**self.request.retries))
    return state
