"""Two managers approving at the same moment cannot push siblings past 100 % (real PostgreSQL).

Each approval runs in its own thread with its own database connection and its own
transaction; a barrier makes sure both transactions are open before either approves. The
parent's row lock serializes them: the second sees the first's rows and is refused.
"""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, connections, transaction

from governance.choices import ApprovalState
from governance.models import Allocation, ApprovalRequest
from governance.selectors.tree import share_at
from governance.services.approvals import approval_approve, approval_request_create


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_approvals_that_together_exceed_100_percent_only_one_wins(personas):
    assert connection.vendor == "postgresql", "this test needs the real PostgreSQL"
    # Vision: Detection 50 %, Segmentation 30 %, 20 % free. Each request takes 15 of it.
    detection_up = approval_request_create(
        actor=personas.pi,
        parent=personas.program_a,
        cluster=personas.cluster,
        percents={personas.project_a1: Decimal("65")},
        reason="Detection's deadline.",
    )
    segmentation_up = approval_request_create(
        actor=personas.org_admin,
        parent=personas.program_a,
        cluster=personas.cluster,
        percents={personas.project_a2: Decimal("45")},
        reason="Segmentation's deadline.",
    )
    barrier = threading.Barrier(2, timeout=30)
    outcomes: dict[str, object] = {}

    def approve(name: str, actor, request_id: int) -> None:
        try:
            with transaction.atomic():
                # Open the transaction for real (a query) before waiting for the other one.
                approval_request = ApprovalRequest.objects.get(pk=request_id)
                backend_pid = connection.connection.info.backend_pid
                outcomes[f"{name}_pid"] = backend_pid
                barrier.wait()
                approval_approve(actor=actor, approval_request=approval_request)
            outcomes[name] = "approved"
        except ValidationError as exc:
            outcomes[name] = exc
        except Exception as exc:  # surfaced by the assertions below
            outcomes[name] = exc
        finally:
            connections.close_all()

    threads = [
        threading.Thread(
            target=approve, args=("detection", personas.program_manager, detection_up.pk)
        ),
        threading.Thread(
            target=approve, args=("segmentation", personas.program_manager, segmentation_up.pk)
        ),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    # Two different database sessions really ran the two approvals.
    assert outcomes["detection_pid"] != outcomes["segmentation_pid"]
    results = [outcomes["detection"], outcomes["segmentation"]]
    assert results.count("approved") == 1, results
    (refusal,) = [r for r in results if r != "approved"]
    assert isinstance(refusal, ValidationError), refusal
    assert "limit 100 %" in refusal.message_dict["shares"][0]

    states = {
        r.pk: r.state
        for r in ApprovalRequest.objects.filter(pk__in=[detection_up.pk, segmentation_up.pk])
    }
    assert sorted(states.values()) == [ApprovalState.APPLIED, ApprovalState.SUBMITTED]
    assert Allocation.objects.filter(approval_request__isnull=False).count() == 1
    total = share_at(node=personas.project_a1, cluster=personas.cluster) + share_at(
        node=personas.project_a2, cluster=personas.cluster
    )
    assert total == Decimal("95.00")  # 65 + 30 or 50 + 45: never 65 + 45
