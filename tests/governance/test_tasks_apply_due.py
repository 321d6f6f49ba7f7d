"""The apply-due task through the real Redis broker and a real Celery worker process.

This is the test that proves Redis and a worker are used: the task is sent with ``delay()``
(never run in-process: eager mode is off), a separate worker process takes it from Redis and
applies the approved request in the test database, and the test only observes the result.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.utils import timezone

from governance.choices import ApprovalState, DecisionAction
from governance.models import Allocation, ApprovalRequest
from governance.selectors.tree import share_at
from governance.services.approvals import approval_approve, approval_request_create
from governance.tasks import allocations_apply_due
from tests.conftest import wait_for


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_real_worker_applies_due_approved_request_sent_through_redis(personas, celery_worker):
    assert not settings.CELERY_TASK_ALWAYS_EAGER
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    effective_from = timezone.now() + timedelta(seconds=2)
    request = approval_request_create(
        actor=personas.pi,
        parent=personas.program_a,
        cluster=personas.cluster,
        percents={personas.project_a1: Decimal("60")},
        reason="Paper deadline.",
        effective_from=effective_from,
    )
    approval_approve(actor=personas.program_manager, approval_request=request)
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED  # not due yet, so not applied
    wait_for(lambda: timezone.now() > effective_from)

    allocations_apply_due.delay()

    def applied():
        return ApprovalRequest.objects.get(pk=request.pk).state == ApprovalState.APPLIED

    assert wait_for(applied, timeout=30), "the worker did not apply the due request"
    assert celery_worker.poll() is None  # the worker process is still the one running
    allocation = Allocation.objects.get(approval_request=request)
    assert (allocation.percent, allocation.valid_from) == (Decimal("60.00"), effective_from)
    assert request.decisions.filter(action=DecisionAction.APPLY, actor__isnull=True).exists()
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("60.00")
