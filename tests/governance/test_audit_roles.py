"""People and roles: who may grant and revoke what, on the page and over the API.

The rule (governance/selectors/roles.py): org admins manage every role of their
organization; program managers manage PI and researcher roles on their program's projects;
nobody else manages roles. Every grant and revocation is in the audit trail.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import AuditEvent, RoleAssignment
from governance.selectors.visibility import user_visibility
from governance.services.roles import role_grant, role_revoke
from tests.factories import UserFactory, org_admin_of

pytestmark = pytest.mark.django_db


def test_program_manager_manages_researchers_of_their_projects_only(personas):
    p = personas
    role_grant(actor=p.program_manager, user=p.outsider, role="researcher", scope=p.project_a2)
    with pytest.raises(PermissionDenied):  # a PI acts on the project's work: the org admin's
        role_grant(actor=p.program_manager, user=p.outsider, role="pi", scope=p.project_a1)
    with pytest.raises(PermissionDenied):  # Translation is in another program
        role_grant(actor=p.program_manager, user=p.outsider, role="researcher", scope=p.project_b1)
    with pytest.raises(PermissionDenied):  # program roles are the org admin's
        role_grant(
            actor=p.program_manager, user=p.outsider, role="program_manager", scope=p.program_a
        )
    with pytest.raises(PermissionDenied):
        role_grant(actor=p.finance, user=p.outsider, role="researcher", scope=p.project_a1)
    assert list(
        RoleAssignment.objects.filter(user=p.outsider).values_list("role", "project__name")
    ) == [("researcher", "Segmentation")]


def test_nobody_grants_a_role_to_themselves(personas):
    p = personas
    # A program manager made PI of a project of their program could cancel its researchers'
    # work; an org admin granting themselves skips the second pair of eyes.
    with pytest.raises(PermissionDenied):
        role_grant(actor=p.program_manager, user=p.program_manager, role="pi", scope=p.project_a1)
    with pytest.raises(PermissionDenied):
        role_grant(
            actor=p.program_manager, user=p.program_manager, role="researcher", scope=p.project_a2
        )
    with pytest.raises(PermissionDenied):
        role_grant(actor=p.org_admin, user=p.org_admin, role="finance", scope=p.organization)
    assert not RoleAssignment.objects.filter(
        user__in=[p.program_manager, p.org_admin], project__isnull=False
    ).exists()


def test_org_admin_grants_every_kind_of_role_and_the_user_sees_more(personas):
    p = personas
    role_grant(actor=p.org_admin, user=p.outsider, role="program_manager", scope=p.program_b)
    role_grant(actor=p.org_admin, user=p.outsider, role="finance", scope=p.organization)
    vis = user_visibility(user=p.outsider)
    assert vis.managed_program_ids == {p.program_b.pk}
    assert vis.finance_org_ids == {p.organization.pk}
    assert AuditEvent.objects.filter(action="role_granted").count() == 2


def test_an_org_admin_may_be_revoked_while_another_remains(personas):
    p = personas
    second = UserFactory(username="second_admin")
    org_admin_of(p.organization, second)
    first = RoleAssignment.objects.get(user=p.org_admin, role="org_admin")
    role_revoke(actor=second, assignment=first, reason="Moved teams.")
    assert not RoleAssignment.objects.filter(pk=first.pk).exists()
    assert AuditEvent.objects.get(action="role_revoked").reason == "Moved teams."


def test_page_lists_roles_and_grants_one(client, personas):
    p = personas
    client.force_login(p.org_admin)
    page = client.get(reverse("people:roles"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "researcher" in html and "project Detection (Vision)" in html
    assert 'href="/people/"' in html  # the nav link

    response = client.post(
        reverse("people:roles"),
        {
            "username": "outsider",
            "grant": f"researcher@project:{p.project_b2.pk}",
            "reason": "Joins Summaries.",
        },
    )
    assert response.status_code == 302
    assert RoleAssignment.objects.filter(
        user=p.outsider, role="researcher", project=p.project_b2
    ).exists()
    assert AuditEvent.objects.get(action="role_granted").actor == p.org_admin


@pytest.mark.parametrize(
    "data, field",
    [
        ({"username": "nobody", "grant": "researcher@project:{a1}"}, "username"),
        ({"username": "outsider", "grant": "org_admin@organization:999"}, "grant"),
        ({"username": "researcher", "grant": "researcher@project:{a1}"}, "grant"),  # already
    ],
)
def test_page_refuses_bad_grants_next_to_the_field(client, personas, data, field):
    p = personas
    data = {k: v.format(a1=p.project_a1.pk) for k, v in data.items()}
    client.force_login(p.org_admin)
    before = RoleAssignment.objects.count()
    response = client.post(reverse("people:roles"), data)
    assert response.status_code == 400
    assert f'id="id_{field}_errors"' in response.content.decode()
    assert RoleAssignment.objects.count() == before
    assert not AuditEvent.objects.exists()


def test_program_manager_page_offers_only_their_projects(client, personas):
    p = personas
    client.force_login(p.program_manager)
    html = client.get(reverse("people:roles")).content.decode()
    assert f"researcher@project:{p.project_a1.pk}" in html
    assert f"researcher@project:{p.project_b1.pk}" not in html
    assert "org_admin@" not in html
    assert "finance</span>" not in html  # the finance role is not theirs to see


def test_page_revoke_and_the_last_org_admin_guard(client, personas):
    p = personas
    client.force_login(p.org_admin)
    member = RoleAssignment.objects.get(user=p.researcher, project=p.project_a1)
    client.post(reverse("people:revoke", kwargs={"pk": member.pk}), {"reason": "Left."})
    assert not RoleAssignment.objects.filter(pk=member.pk).exists()

    own = RoleAssignment.objects.get(user=p.org_admin, role="org_admin")
    response = client.post(reverse("people:revoke", kwargs={"pk": own.pk}), follow=True)
    assert "last org admin" in response.content.decode()
    assert RoleAssignment.objects.filter(pk=own.pk).exists()
    assert list(AuditEvent.objects.values_list("action", flat=True)) == ["role_revoked"]


def test_api_grant_and_revoke(personas):
    p = personas
    api = APIClient()
    api.force_login(p.program_manager)
    body = {
        "user": "outsider",
        "role": "researcher",
        "scope": {"kind": "project", "id": p.project_a1.pk},
        "reason": "New student.",
    }
    created = api.post(reverse("api:roleassignment-list"), body, format="json")
    assert created.status_code == 201
    assert created.json()["scope"] == {
        "kind": "project",
        "id": p.project_a1.pk,
        "name": "project Detection (Vision)",
    }
    duplicate = api.post(reverse("api:roleassignment-list"), body, format="json")
    assert duplicate.status_code == 400 and "role" in duplicate.json()["errors"]
    unknown = api.post(
        reverse("api:roleassignment-list"), {**body, "user": "nobody"}, format="json"
    )
    assert unknown.status_code == 400 and "user" in unknown.json()["errors"]
    wrong_level = api.post(
        reverse("api:roleassignment-list"),
        {**body, "role": "program_manager"},
        format="json",
    )
    assert wrong_level.status_code == 400 and "scope" in wrong_level.json()["errors"]

    revoke = reverse("api:roleassignment-revoke", kwargs={"pk": created.json()["id"]})
    assert api.post(revoke, {"reason": "Graduated."}, format="json").status_code == 204
    assert [e.reason for e in AuditEvent.objects.order_by("id")] == [
        "New student.",
        "Graduated.",
    ]
