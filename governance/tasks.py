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
