"""Approval requests and splits through the API: create, list (mine / inbox), detail with
lines and decisions, submit, approve, reject, withdraw, and a manager's direct split.

Refusals (bad input, deciding what you may not) are in ``api_bad_input/``.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from governance.choices import ApprovalState
from governance.models import Allocation, ApprovalRequest
from governance.selectors.tree import share_at

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """Hash the personas' passwords cheaply (autouse, so it runs before ``personas``)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def request_payload(personas, *, percent="60", submit=True, **extra) -> dict:
    """The PI asks for Detection (project A1, 50 % of Vision today) to get ``percent``."""
    return {
        "parent": {"kind": "program", "id": personas.program_a.pk},
        "cluster": personas.cluster.pk,
        "lines": [{"node": personas.project_a1.pk, "percent": percent}],
        "reason": "Paper deadline in March.",
        "submit": submit,
        **extra,
    }


def create_request(personas, **kwargs) -> dict:
    response = client_for(personas.pi).post(
        "/api/approval-requests/", request_payload(personas, **kwargs), format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def detection_share(personas) -> Decimal:
    return share_at(node=personas.project_a1, cluster=personas.cluster, at=timezone.now())


def test_pi_creates_a_submitted_request_with_its_line_and_history(personas):
    body = create_request(personas)
    assert body["state"] == "submitted"
    assert body["parent"] == {"kind": "program", "id": personas.program_a.pk, "name": "Vision"}
    assert body["requested_by"]["username"] == "pi"
    assert [
        (line["node"]["name"], Decimal(line["percent"]), Decimal(line["previous_percent"]))
        for line in body["lines"]
    ] == [("Detection", Decimal("60"), Decimal("50"))]
    assert [(d["action"], d["from_state"], d["to_state"]) for d in body["decisions"]] == [
        ("create", "", "draft"),
        ("submit", "draft", "submitted"),
    ]
    stored = ApprovalRequest.objects.get(pk=body["id"])
    assert stored.state == ApprovalState.SUBMITTED
    assert stored.reason == "Paper deadline in March."


def test_pi_keeps_a_draft_then_submits_it(personas):
    draft = create_request(personas, submit=False)
    assert draft["state"] == "draft"
    response = client_for(personas.pi).post(f"/api/approval-requests/{draft['id']}/submit/")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "submitted"
    assert ApprovalRequest.objects.get(pk=draft["id"]).state == ApprovalState.SUBMITTED


def test_program_manager_approves_and_the_share_applies_now(personas):
    created = create_request(personas)
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{created['id']}/approve/",
        {"comment": "Fits in the unallocated 20 %."},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "applied"
    approve = next(d for d in body["decisions"] if d["action"] == "approve")
    assert approve["actor"]["username"] == "program_manager"
    assert approve["comment"] == "Fits in the unallocated 20 %."
    assert detection_share(personas) == Decimal("60")
    assert Allocation.objects.filter(approval_request_id=created["id"]).count() == 1


def test_org_admin_rejects_with_a_comment_and_nothing_is_applied(personas):
    created = create_request(personas)
    response = client_for(personas.org_admin).post(
        f"/api/approval-requests/{created['id']}/reject/",
        {"comment": "Vision is needed for the launch."},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "rejected"
    assert detection_share(personas) == Decimal("50")


def test_pi_withdraws_their_own_request(personas):
    created = create_request(personas)
    response = client_for(personas.pi).post(
        f"/api/approval-requests/{created['id']}/withdraw/", {}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "withdrawn"


def test_a_future_dated_request_is_approved_and_waits_for_its_date(personas):
    start = timezone.now() + timedelta(days=7)
    created = create_request(personas, effective_from=start.isoformat())
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{created['id']}/approve/"
    )
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "approved"
    assert detection_share(personas) == Decimal("50")
    assert share_at(
        node=personas.project_a1, cluster=personas.cluster, at=start + timedelta(hours=1)
    ) == Decimal("50")  # not applied until approvals_apply_due runs at its date


def test_inbox_lists_what_waits_for_my_decision_and_mine_lists_my_requests(personas):
    created = create_request(personas)
    pm = client_for(personas.program_manager)
    inbox = pm.get("/api/approval-requests/", {"box": "inbox"}).json()["results"]
    assert [r["id"] for r in inbox] == [created["id"]]
    assert pm.get("/api/approval-requests/", {"box": "mine"}).json()["results"] == []

    pi = client_for(personas.pi)
    assert [
        r["id"] for r in pi.get("/api/approval-requests/", {"box": "mine"}).json()["results"]
    ] == [created["id"]]
    assert pi.get("/api/approval-requests/", {"box": "inbox"}).json()["results"] == []


def test_requests_filter_by_state(personas):
    submitted = create_request(personas)
    draft = create_request(personas, submit=False)
    client = client_for(personas.org_admin)
    drafts = client.get("/api/approval-requests/", {"state": "draft"}).json()["results"]
    assert [r["id"] for r in drafts] == [draft["id"]]
    open_ones = client.get("/api/approval-requests/", {"state": ["draft", "submitted"]})
    assert {r["id"] for r in open_ones.json()["results"]} == {draft["id"], submitted["id"]}


def test_request_detail_shows_lines_and_decisions_to_a_manager(personas):
    created = create_request(personas)
    response = client_for(personas.program_manager).get(f"/api/approval-requests/{created['id']}/")
    assert response.status_code == 200
    body = response.json()
    assert body["lines"][0]["node"]["name"] == "Detection"
    assert [d["action"] for d in body["decisions"]] == ["create", "submit"]


def test_program_manager_splits_their_program_directly(personas):
    payload = {
        "parent": {"kind": "program", "id": personas.program_a.pk},
        "cluster": personas.cluster.pk,
        "shares": [
            {"node": personas.project_a1.pk, "percent": "45.5"},
            {"node": personas.project_a2.pk, "percent": 54.5},
        ],
        "reason": "Rebalance after the review.",
    }
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    assert response.status_code == 201, response.content
    rows = response.json()
    assert [(r["node"]["name"], Decimal(r["percent"])) for r in rows] == [
        ("Detection", Decimal("45.5")),
        ("Segmentation", Decimal("54.5")),
    ]
    assert all(r["set_by"]["username"] == "program_manager" for r in rows)
    assert detection_share(personas) == Decimal("45.50")


def test_org_admin_gives_a_temporary_grant_that_ends(personas):
    start = timezone.now() + timedelta(days=1)
    end = start + timedelta(days=2)
    payload = {
        "parent": {"kind": "organization", "id": personas.organization.pk},
        "cluster": personas.cluster.pk,
        "shares": [
            {"node": personas.program_a.pk, "percent": "70"},
            {"node": personas.program_b.pk, "percent": "30"},
        ],
        "reason": "Vision's launch week.",
        "valid_from": start.isoformat(),
        "valid_to": end.isoformat(),
    }
    response = client_for(personas.org_admin).post("/api/splits/", payload, format="json")
    assert response.status_code == 201, response.content

    def vision_at(at):
        return share_at(node=personas.program_a, cluster=personas.cluster, at=at)

    assert vision_at(start + timedelta(hours=1)) == Decimal("70")
    assert vision_at(end + timedelta(hours=1)) == Decimal("60")


def test_a_script_gets_a_token_and_uses_it(personas):
    anonymous = APIClient()
    response = anonymous.post(
        "/api/token/",
        {"username": "finance", "password": personas.password},
        format="json",
    )
    assert response.status_code == 200, response.content
    token = response.json()["token"]
    script = APIClient()
    script.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    listed = script.get("/api/programs/")
    assert listed.status_code == 200
    assert {r["name"] for r in listed.json()["results"]} == {"Vision", "Language"}


def test_a_wrong_password_gets_no_token(personas):
    response = APIClient().post(
        "/api/token/", {"username": "finance", "password": "wrong"}, format="json"
    )
    assert response.status_code == 400
    assert "non_field_errors" in response.json()["errors"]
