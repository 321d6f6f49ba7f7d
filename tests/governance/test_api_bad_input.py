"""Every bad input of the budget API is refused with a clear status, names the field, and
changes nothing in the database.

Each test takes a snapshot of every row the API can write (allocations, requests and their
states, lines, decisions, tokens) before the call and compares it after.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from governance.models import Allocation, ApprovalDecision, ApprovalLine, ApprovalRequest
from tests.factories import ClusterFactory, OrganizationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """Hash the personas' passwords cheaply (autouse, so it runs before ``personas``)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def snapshot() -> dict:
    """Every row the budget API can write, with the fields a write would change."""
    return {
        "allocations": list(
            Allocation.objects.order_by("pk").values_list(
                "pk", "program_id", "project_id", "percent", "valid_from", "valid_to"
            )
        ),
        "requests": list(ApprovalRequest.objects.order_by("pk").values_list("pk", "state")),
        "lines": list(ApprovalLine.objects.order_by("pk").values_list("pk", "percent")),
        "decisions": list(ApprovalDecision.objects.order_by("pk").values_list("pk", flat=True)),
        "tokens": Token.objects.count(),
    }


@pytest.fixture
def unchanged(personas):
    """Assert, after the test body, that the database is exactly as it was before."""
    before = snapshot()
    yield
    assert snapshot() == before


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def split(personas, **overrides) -> dict:
    """A valid split of Vision (program A) between Detection and Segmentation."""
    payload = {
        "parent": {"kind": "program", "id": personas.program_a.pk},
        "cluster": personas.cluster.pk,
        "shares": [
            {"node": personas.project_a1.pk, "percent": "50"},
            {"node": personas.project_a2.pk, "percent": "40"},
        ],
        "reason": "Rebalance.",
    }
    payload.update(overrides)
    return payload


def request_by_pi(personas, **overrides) -> dict:
    payload = {
        "parent": {"kind": "program", "id": personas.program_a.pk},
        "cluster": personas.cluster.pk,
        "lines": [{"node": personas.project_a1.pk, "percent": "60"}],
        "reason": "Paper deadline.",
    }
    payload.update(overrides)
    return payload


def refused(response, status: int, *fields: str) -> dict:
    """Assert the status and that ``errors`` names exactly ``fields``; return the body."""
    assert response.status_code == status, response.content
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    if fields:
        assert sorted(body["errors"]) == sorted(fields), body
    return body


@pytest.fixture
def submitted(personas):
    """A request by the PI, submitted, waiting for the program manager."""
    response = client_for(personas.pi).post(
        "/api/approval-requests/", request_by_pi(personas), format="json"
    )
    assert response.status_code == 201, response.content
    return ApprovalRequest.objects.get(pk=response.json()["id"])


# --- Percent outside 0-100 or not a number -------------------------------------------------


@pytest.mark.parametrize("percent", ["100.01", "-1", 250])
def test_split_percent_outside_0_to_100_is_refused_naming_it(personas, unchanged, percent):
    payload = split(personas, shares=[{"node": personas.project_a1.pk, "percent": percent}])
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    body = refused(response, 400, "shares[0].percent")
    assert body["detail"].startswith("shares[0].percent: ")


@pytest.mark.parametrize("percent", ["lots", "", None, "1e400", "NaN", [50], {"v": 1}])
def test_split_percent_that_is_not_a_number_is_refused_naming_it(personas, unchanged, percent):
    payload = split(personas)
    payload["shares"][1]["percent"] = percent
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "shares[1].percent")


def test_request_percent_outside_0_to_100_is_refused_naming_the_line(personas, unchanged):
    payload = request_by_pi(personas, lines=[{"node": personas.project_a1.pk, "percent": "101"}])
    response = client_for(personas.pi).post("/api/approval-requests/", payload, format="json")
    refused(response, 400, "lines[0].percent")


def test_request_percent_that_is_not_a_number_is_refused_naming_the_line(personas, unchanged):
    payload = request_by_pi(personas, lines=[{"node": personas.project_a1.pk, "percent": "ten"}])
    response = client_for(personas.pi).post("/api/approval-requests/", payload, format="json")
    refused(response, 400, "lines[0].percent")


def test_split_with_three_decimals_is_refused_naming_the_percent(personas, unchanged):
    payload = split(personas, shares=[{"node": personas.project_a1.pk, "percent": "33.333"}])
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "shares[0].percent")


# --- Sums past 100 % -----------------------------------------------------------------------


def test_split_whose_children_sum_past_100_is_refused(personas, unchanged):
    # Detection 75 + Segmentation 30 (unchanged) = 105 %.
    payload = split(personas, shares=[{"node": personas.project_a1.pk, "percent": "75"}])
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    body = refused(response, 400, "shares")
    assert "105.00" in body["errors"]["shares"][0]


def test_approving_a_request_that_would_sum_past_100_is_refused(personas):
    payload = request_by_pi(personas, lines=[{"node": personas.project_a1.pk, "percent": "80"}])
    created = client_for(personas.pi).post("/api/approval-requests/", payload, format="json")
    assert created.status_code == 201  # a PI may ask for more than is free today
    before = snapshot()
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{created.json()['id']}/approve/"
    )
    refused(response, 400, "shares")
    assert snapshot() == before


def test_the_same_node_twice_in_a_split_is_refused(personas, unchanged):
    node = personas.project_a1.pk
    payload = split(
        personas, shares=[{"node": node, "percent": "10"}, {"node": node, "percent": "20"}]
    )
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "shares")


def test_an_empty_split_is_refused(personas, unchanged):
    response = client_for(personas.program_manager).post(
        "/api/splits/", split(personas, shares=[]), format="json"
    )
    refused(response, 400, "shares")


# --- Dates ---------------------------------------------------------------------------------


def test_split_valid_to_before_valid_from_is_refused_naming_valid_to(personas, unchanged):
    start = timezone.now() + timedelta(days=2)
    payload = split(
        personas,
        valid_from=start.isoformat(),
        valid_to=(start - timedelta(days=1)).isoformat(),
    )
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "valid_to")


def test_request_effective_to_before_effective_from_is_refused_naming_it(personas, unchanged):
    start = timezone.now() + timedelta(days=2)
    payload = request_by_pi(
        personas,
        effective_from=start.isoformat(),
        effective_to=(start - timedelta(hours=1)).isoformat(),
    )
    response = client_for(personas.pi).post("/api/approval-requests/", payload, format="json")
    refused(response, 400, "effective_to")


def test_a_date_that_is_not_a_date_is_refused_naming_it(personas, unchanged):
    payload = split(personas, valid_from="next tuesday")
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "valid_from")


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


# --- Ids that do not exist or are not yours: 404, the same for both ------------------------


def test_another_programs_parent_is_404_like_a_missing_one(personas, unchanged):
    pm = client_for(personas.program_manager)
    other = split(personas, parent={"kind": "program", "id": personas.program_b.pk})
    missing = split(personas, parent={"kind": "program", "id": 999999})
    hidden = refused(pm.post("/api/splits/", other, format="json"), 404, "parent.id")
    absent = refused(pm.post("/api/splits/", missing, format="json"), 404, "parent.id")
    assert hidden["errors"]["parent.id"] == [f"No program with id {personas.program_b.pk}."]
    assert absent["errors"]["parent.id"] == ["No program with id 999999."]


def test_another_programs_node_is_404_naming_the_line(personas, unchanged):
    payload = split(personas, shares=[{"node": personas.project_b1.pk, "percent": "10"}])
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 404, "shares[0].node")


def test_a_visible_node_under_another_parent_is_refused_naming_it(personas, unchanged):
    # The org admin sees Translation, but it is a child of Language, not Vision.
    payload = split(personas, shares=[{"node": personas.project_b1.pk, "percent": "10"}])
    response = client_for(personas.org_admin).post("/api/splits/", payload, format="json")
    refused(response, 400, "shares[0].node")


def test_another_organizations_cluster_is_404_naming_cluster(personas, unchanged):
    foreign = ClusterFactory(organization=OrganizationFactory())
    before = snapshot()
    for cluster_id in (foreign.pk, 999999):
        response = client_for(personas.org_admin).post(
            "/api/splits/", split(personas, cluster=cluster_id), format="json"
        )
        refused(response, 404, "cluster")
    assert snapshot() == before


def test_outsider_gets_404_for_every_object_of_the_organization(personas, submitted):
    before = snapshot()
    outsider = client_for(personas.outsider)
    refused(outsider.post("/api/splits/", split(personas), format="json"), 404, "parent.id")
    refused(outsider.post(f"/api/approval-requests/{submitted.pk}/approve/"), 404)
    refused(outsider.get(f"/api/approval-requests/{submitted.pk}/"), 404)
    refused(outsider.get(f"/api/clusters/{personas.cluster.pk}/tree/"), 404)
    assert snapshot() == before


def test_a_request_about_another_program_is_404_to_a_program_manager(personas):
    payload = {
        "parent": {"kind": "program", "id": personas.program_b.pk},
        "cluster": personas.cluster.pk,
        "lines": [{"node": personas.project_b1.pk, "percent": "65"}],
        "reason": "Less for Translation.",
    }
    created = client_for(personas.org_admin).post("/api/approval-requests/", payload, format="json")
    assert created.status_code == 201, created.content
    before = snapshot()
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{created.json()['id']}/reject/",
        {"comment": "Not mine."},
        format="json",
    )
    refused(response, 404)
    assert snapshot() == before


# --- Bodies that are not JSON, or too large ------------------------------------------------


def test_a_body_that_is_not_json_is_a_400(personas, unchanged):
    response = client_for(personas.program_manager).post(
        "/api/splits/", data="{'parent': oops", content_type="application/json"
    )
    body = refused(response, 400)
    assert body["detail"].startswith("JSON parse error")


def test_a_body_that_is_not_json_at_all_is_a_415(personas, unchanged):
    response = client_for(personas.program_manager).post(
        "/api/splits/", data="parent=1&cluster=1", content_type="application/x-www-form-urlencoded"
    )
    body = refused(response, 415)
    assert "application/x-www-form-urlencoded" in body["detail"]


def test_a_json_body_that_is_not_an_object_is_refused(personas, unchanged):
    response = client_for(personas.program_manager).post(
        "/api/splits/", data="[1, 2, 3]", content_type="application/json"
    )
    refused(response, 400, "non_field_errors")


def test_an_oversized_body_is_a_413_and_changes_nothing(personas, unchanged, settings):
    payload = split(personas, reason="x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1))
    response = client_for(personas.program_manager).post(
        "/api/splits/", data=json.dumps(payload), content_type="application/json"
    )
    body = refused(response, 413)
    assert body["detail"] == "Request body is too large."


def test_an_oversized_body_to_an_approval_action_is_a_413(personas, submitted, settings):
    before = snapshot()
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{submitted.pk}/approve/",
        data=json.dumps({"comment": "y" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE}),
        content_type="application/json",
    )
    refused(response, 413)
    assert snapshot() == before


def test_an_oversized_token_request_is_a_413(personas, unchanged, settings):
    response = APIClient().post(
        "/api/token/",
        data="username=pi&password=" + "z" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        content_type="application/x-www-form-urlencoded",
    )
    refused(response, 413)


def test_missing_fields_are_each_named(personas, unchanged):
    response = client_for(personas.program_manager).post("/api/splits/", {}, format="json")
    refused(response, 400, "parent", "cluster", "shares", "reason")


def test_an_unknown_parent_kind_is_refused_naming_it(personas, unchanged):
    payload = split(personas, parent={"kind": "project", "id": personas.project_a1.pk})
    response = client_for(personas.org_admin).post("/api/splits/", payload, format="json")
    refused(response, 400, "parent.kind")
