"""Celery tasks of the budget domain: thin wrappers that take ids and call one service."""

from celery import shared_task


@shared_task(acks_late=True)
def allocations_apply_due() -> int:
    """Apply approved allocation changes whose effective date has arrived (filled in later)."""
    return 0
