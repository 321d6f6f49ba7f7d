"""Deciding what you may not, or what is already decided, and changing shares without the role."""

from __future__ import annotations

import pytest

from tests.governance.api_bad_input.helpers import (
    client_for,
    refused,
    request_by_pi,
    snapshot,
    split,
)

pytestmark = pytest.mark.django_db


# --- Deciding what you may not, or what is decided -----------------------------------------


@pytest.mark.parametrize("persona", ["researcher", "finance"])
def test_a_role_that_may_not_decide_cannot_approve(personas, submitted, persona):
    before = snapshot()
    response = client_for(personas.users[persona]).post(
        f"/api/approval-requests/{submitted.pk}/approve/"
    )
    # The researcher cannot see the PI's requests at all (404); finance sees but may not act.
    refused(response, 404 if persona == "researcher" else 403)
    assert snapshot() == before


def test_pi_cannot_approve_their_own_request(personas, submitted):
    before = snapshot()
    response = client_for(personas.pi).post(f"/api/approval-requests/{submitted.pk}/approve/")
    body = refused(response, 403)
    assert body["detail"] == "You cannot approve your own request."
    assert snapshot() == before


def test_org_admin_cannot_approve_a_request_they_made(personas):
    payload = {
        "parent": {"kind": "organization", "id": personas.organization.pk},
        "cluster": personas.cluster.pk,
        "lines": [{"node": personas.program_a.pk, "percent": "55"}],
        "reason": "Shift time to Language.",
    }
    admin = client_for(personas.org_admin)
    created = admin.post("/api/approval-requests/", payload, format="json")
    assert created.status_code == 201, created.content
    before = snapshot()
    response = admin.post(f"/api/approval-requests/{created.json()['id']}/approve/")
    refused(response, 403)
    assert snapshot() == before


def test_a_decided_request_cannot_be_decided_again(personas, submitted):
    pm = client_for(personas.program_manager)
    assert pm.post(f"/api/approval-requests/{submitted.pk}/approve/").status_code == 200
    before = snapshot()
    again = pm.post(f"/api/approval-requests/{submitted.pk}/approve/")
    refused(again, 400, "state")
    reject = client_for(personas.org_admin).post(
        f"/api/approval-requests/{submitted.pk}/reject/", {"comment": "Too late."}, format="json"
    )
    refused(reject, 400, "state")
    assert snapshot() == before


def test_rejecting_without_a_comment_is_refused_naming_comment(personas, submitted):
    before = snapshot()
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{submitted.pk}/reject/", {}, format="json"
    )
    refused(response, 400, "comment")
    assert snapshot() == before


def test_only_the_requester_withdraws(personas, submitted):
    before = snapshot()
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{submitted.pk}/withdraw/"
    )
    refused(response, 403)
    assert snapshot() == before


def test_finance_cannot_split(personas, unchanged):
    response = client_for(personas.finance).post("/api/splits/", split(personas), format="json")
    refused(response, 403)


def test_pi_cannot_split_their_program_directly(personas, unchanged):
    response = client_for(personas.pi).post("/api/splits/", split(personas), format="json")
    refused(response, 403)


def test_researcher_cannot_request_a_change(personas, unchanged):
    response = client_for(personas.researcher).post(
        "/api/approval-requests/", request_by_pi(personas), format="json"
    )
    refused(response, 403)
