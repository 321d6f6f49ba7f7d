"""Approval inbox (waiting for me) and my requests."""

from __future__ import annotations

from decimal import Decimal

import pytest

from governance.services.approvals import approval_reject, approval_request_create

pytestmark = pytest.mark.django_db


def request_by(personas, actor, parent, node, percent="10"):
    return approval_request_create(
        actor=actor,
        parent=parent,
        cluster=personas.cluster,
        percents={node: Decimal(percent)},
        reason="Needed.",
    )


def inbox_of(personas, name) -> set[int]:
    from governance.selectors.approvals import approval_inbox

    return set(approval_inbox(user=personas.users[name]).values_list("id", flat=True))


def test_pi_request_waits_for_the_program_manager_and_the_org_admin(personas):
    request = request_by(personas, personas.pi, personas.program_a, personas.project_a1)
    waiting_for = {name for name in personas.users if request.pk in inbox_of(personas, name)}
    assert waiting_for == {"program_manager", "org_admin"}


def test_own_requests_never_appear_in_ones_own_inbox(personas):
    request = request_by(
        personas, personas.program_manager, personas.program_a, personas.project_a2
    )
    assert request.pk not in inbox_of(personas, "program_manager")
    assert request.pk in inbox_of(personas, "org_admin")


def test_decided_requests_leave_the_inbox(personas):
    request = request_by(personas, personas.pi, personas.program_a, personas.project_a1)
    approval_reject(actor=personas.org_admin, approval_request=request, comment="No room.")
    assert inbox_of(personas, "program_manager") == set()


def test_program_level_requests_wait_for_the_org_admin_only(personas):
    request = request_by(
        personas, personas.program_manager, personas.organization, personas.program_a, "50"
    )
    assert request.pk in inbox_of(personas, "org_admin")
    assert request.pk not in inbox_of(personas, "program_manager")


def test_my_requests_lists_every_state_newest_first(personas):
    from governance.selectors.approvals import approval_requests_by

    first = request_by(personas, personas.pi, personas.program_a, personas.project_a1)
    approval_reject(actor=personas.program_manager, approval_request=first, comment="Later.")
    second = request_by(personas, personas.pi, personas.program_a, personas.project_a1, "55")
    mine = list(approval_requests_by(user=personas.pi))
    assert mine == [second, first]
    assert list(approval_requests_by(user=personas.researcher)) == []
