"""Read endpoints of the budget API: lists and details scoped to the caller, the tree of a
cluster, allocations with their filters, and a node's history.

Expected figures come from the personas' baseline tree (see ``tests/personas.py``): Vision 60 %
of Acme with Detection 50 % and Segmentation 30 % of Vision; Language 40 % with Translation
70 % and Summaries 30 %; one cluster of 4 x 8 = 32 GPUs.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from governance.models import Allocation
from tests.factories import AllocationFactory, ClusterFactory, OrganizationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """Hash the personas' passwords cheaply (autouse, so it runs before ``personas``)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


def ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def test_anonymous_caller_is_refused_every_list(personas):
    response = APIClient().get("/api/programs/")
    assert response.status_code == 403
    assert response.json()["detail"] == "Authentication credentials were not provided."


def test_org_admin_and_finance_list_every_program_and_project_of_their_organization(personas):
    every_program = {p.pk for p in personas.programs}
    every_project = {p.pk for p in personas.projects}
    for persona in ("org_admin", "finance"):
        client = client_for(personas.users[persona])
        assert ids(client.get("/api/programs/")) == every_program
        assert ids(client.get("/api/projects/")) == every_project
        assert ids(client.get("/api/organizations/")) == {personas.organization.pk}
        assert ids(client.get("/api/clusters/")) == {personas.cluster.pk}


def test_program_manager_lists_their_program_and_its_projects_only(personas):
    client = client_for(personas.program_manager)
    assert ids(client.get("/api/programs/")) == {personas.program_a.pk}
    assert ids(client.get("/api/projects/")) == {personas.project_a1.pk, personas.project_a2.pk}


def test_pi_and_researcher_list_their_project_and_its_program_only(personas):
    for persona in ("pi", "researcher"):
        client = client_for(personas.users[persona])
        assert ids(client.get("/api/programs/")) == {personas.program_a.pk}
        assert ids(client.get("/api/projects/")) == {personas.project_a1.pk}
        assert ids(client.get("/api/clusters/")) == {personas.cluster.pk}


def test_outsider_lists_are_empty(personas):
    client = client_for(personas.outsider)
    for url in (
        "/api/organizations/",
        "/api/programs/",
        "/api/projects/",
        "/api/clusters/",
        "/api/allocations/",
        "/api/approval-requests/",
    ):
        assert ids(client.get(url)) == set(), url


def test_detail_of_a_program_the_caller_cannot_see_is_404_like_one_that_does_not_exist(
    personas,
):
    client = client_for(personas.program_manager)
    hidden = client.get(f"/api/programs/{personas.program_b.pk}/")
    missing = client.get("/api/programs/999999/")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json() == {"detail": "No Program matches the given query."}


def test_program_detail_shows_its_organization(personas):
    response = client_for(personas.pi).get(f"/api/programs/{personas.program_a.pk}/")
    assert response.status_code == 200
    assert response.json() == {
        "id": personas.program_a.pk,
        "organization": personas.organization.pk,
        "name": "Vision",
        "slug": "vision",
    }


def test_projects_filter_by_program_and_refuse_a_hidden_program(personas):
    admin = client_for(personas.org_admin)
    response = admin.get("/api/projects/", {"program": personas.program_b.pk})
    assert ids(response) == {personas.project_b1.pk, personas.project_b2.pk}

    pm = client_for(personas.program_manager)
    refused = pm.get("/api/projects/", {"program": personas.program_b.pk})
    assert refused.status_code == 400
    assert "program" in refused.json()["errors"]


def find(tree: dict, name: str) -> dict:
    if tree["name"] == name:
        return tree
    for child in tree["children"]:
        found = find(child, name) if child else None
        if found:
            return found
    return {}


def test_tree_shows_shares_effective_shares_unallocated_and_managers(personas):
    response = client_for(personas.org_admin).get(f"/api/clusters/{personas.cluster.pk}/tree/")
    assert response.status_code == 200, response.content
    root = response.json()
    assert root["kind"] == "organization"
    assert root["name"] == "Acme Research"
    assert Decimal(root["effective_share"]) == Decimal("100")
    assert Decimal(root["unallocated"]) == Decimal("0")

    vision = find(root, "Vision")
    assert vision["kind"] == "program"
    assert Decimal(vision["share"]) == Decimal("60")
    assert Decimal(vision["unallocated"]) == Decimal("20")  # 100 - 50 - 30
    assert [m["username"] for m in vision["managers"]] == ["program_manager"]

    detection = find(root, "Detection")
    assert Decimal(detection["share"]) == Decimal("50")
    assert Decimal(detection["effective_share"]) == Decimal("30")  # 60 % x 50 %
    assert detection["gpus_entitled"] == pytest.approx(9.6)  # 30 % of 32 GPUs

    translation = find(root, "Translation")
    assert Decimal(translation["effective_share"]) == Decimal("28")  # 40 % x 70 %


def test_tree_of_a_pi_shows_only_their_branch(personas):
    response = client_for(personas.pi).get(f"/api/clusters/{personas.cluster.pk}/tree/")
    assert response.status_code == 200, response.content
    root = response.json()
    assert [child["name"] for child in root["children"]] == ["Vision"]
    assert [child["name"] for child in root["children"][0]["children"]] == ["Detection"]


def test_tree_as_of_an_earlier_instant_shows_the_shares_then(personas):
    AllocationFactory(
        cluster=personas.cluster,
        program=None,
        project=personas.project_a1,
        percent=Decimal("70.00"),
        valid_from=timezone.now() - timedelta(days=1),
        set_by=personas.org_admin,
    )
    client = client_for(personas.org_admin)
    now = client.get(f"/api/clusters/{personas.cluster.pk}/tree/").json()
    before = client.get(
        f"/api/clusters/{personas.cluster.pk}/tree/",
        {"at": (timezone.now() - timedelta(days=2)).isoformat()},
    ).json()
    assert Decimal(find(now, "Detection")["share"]) == Decimal("70")
    assert Decimal(find(before, "Detection")["share"]) == Decimal("50")


def test_tree_refuses_an_instant_that_is_not_a_date(personas):
    response = client_for(personas.org_admin).get(
        f"/api/clusters/{personas.cluster.pk}/tree/", {"at": "yesterday"}
    )
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["at"]


def test_tree_of_another_organizations_cluster_is_404(personas):
    foreign = ClusterFactory(organization=OrganizationFactory())
    response = client_for(personas.org_admin).get(f"/api/clusters/{foreign.pk}/tree/")
    assert response.status_code == 404


def test_allocations_filter_by_cluster_program_and_project(personas):
    client = client_for(personas.org_admin)
    rows = client.get("/api/allocations/", {"project": personas.project_b1.pk}).json()["results"]
    assert [(r["node"]["name"], Decimal(r["percent"])) for r in rows] == [
        ("Translation", Decimal("70"))
    ]
    rows = client.get("/api/allocations/", {"program": personas.program_a.pk}).json()["results"]
    assert [(r["node"]["kind"], r["node"]["name"]) for r in rows] == [("program", "Vision")]
    by_cluster = ids(client.get("/api/allocations/", {"cluster": personas.cluster.pk}))
    assert len(by_cluster) == 6  # the six baseline shares


def test_allocations_of_a_pi_are_those_of_their_project_and_program(personas):
    rows = client_for(personas.pi).get("/api/allocations/").json()["results"]
    assert sorted(r["node"]["name"] for r in rows) == ["Detection", "Vision"]


def test_allocation_detail_names_who_set_it_and_why(personas):
    allocation = Allocation.objects.get(project=personas.project_a1)
    response = client_for(personas.researcher).get(f"/api/allocations/{allocation.pk}/")
    assert response.status_code == 200
    body = response.json()
    assert body["set_by"]["username"] == "org_admin"
    assert body["reason"] == "Baseline split of the personas' tree."
    assert body["node"] == {"kind": "project", "id": personas.project_a1.pk, "name": "Detection"}


def test_history_of_a_project_lists_its_versions_newest_first(personas):
    AllocationFactory(
        cluster=personas.cluster,
        program=None,
        project=personas.project_a1,
        percent=Decimal("55.00"),
        valid_from=timezone.now() - timedelta(days=3),
        set_by=personas.program_manager,
        reason="Paper deadline.",
    )
    response = client_for(personas.pi).get(
        f"/api/projects/{personas.project_a1.pk}/history/", {"cluster": personas.cluster.pk}
    )
    assert response.status_code == 200, response.content
    rows = response.json()["results"]
    assert [(Decimal(r["percent"]), r["reason"]) for r in rows] == [
        (Decimal("55"), "Paper deadline."),
        (Decimal("50"), "Baseline split of the personas' tree."),
    ]


def test_history_of_a_program_the_caller_cannot_see_is_404(personas):
    response = client_for(personas.pi).get(f"/api/programs/{personas.program_b.pk}/history/")
    assert response.status_code == 404


def test_history_on_a_hidden_cluster_is_404_naming_the_cluster(personas):
    foreign = ClusterFactory(organization=OrganizationFactory())
    response = client_for(personas.org_admin).get(
        f"/api/programs/{personas.program_a.pk}/history/", {"cluster": foreign.pk}
    )
    assert response.status_code == 404
    assert list(response.json()["errors"]) == ["cluster"]
