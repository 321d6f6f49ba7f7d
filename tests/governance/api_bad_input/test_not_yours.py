"""Ids that do not exist or are not yours: 404, the same for both."""

from __future__ import annotations

import pytest

from tests.factories import ClusterFactory, OrganizationFactory
from tests.governance.api_bad_input.helpers import (
    client_for,
    refused,
    snapshot,
    split,
)

pytestmark = pytest.mark.django_db


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
