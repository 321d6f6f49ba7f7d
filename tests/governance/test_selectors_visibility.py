"""The one visibility selector: what each persona sees and may change."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from governance.choices import Role
from governance.selectors.visibility import user_visibility
from tests.factories import (
    ApprovalRequestFactory,
    ClusterFactory,
    OrganizationFactory,
    ProgramFactory,
)

pytestmark = pytest.mark.django_db


def names(queryset) -> set[str]:
    return {obj.name for obj in queryset}


def test_org_admin_sees_and_manages_the_whole_organization(personas):
    vis = user_visibility(user=personas.org_admin)
    assert names(vis.organizations()) == {"Acme Research"}
    assert names(vis.programs()) == {"Vision", "Language"}
    assert names(vis.projects()) == {"Detection", "Segmentation", "Translation", "Summaries"}
    assert names(vis.clusters()) == {"h100"}
    assert vis.allocations().count() == 6
    assert vis.can_manage(personas.organization)
    assert vis.can_manage(personas.program_b)
    assert vis.can_view_reports
    assert vis.roles == {Role.ORG_ADMIN}


def test_program_manager_sees_org_node_their_program_and_its_projects(personas):
    vis = user_visibility(user=personas.program_manager)
    assert names(vis.organizations()) == {"Acme Research"}
    assert names(vis.programs()) == {"Vision"}
    assert names(vis.projects()) == {"Detection", "Segmentation"}
    assert vis.can_manage(personas.program_a)
    assert not vis.can_manage(personas.program_b)
    assert not vis.can_manage(personas.organization)
    assert vis.can_request(personas.program_a)
    assert vis.can_request(personas.project_a2)
    assert not vis.can_request(personas.project_b1)
    assert not vis.can_view_reports


def test_pi_sees_their_project_and_its_ancestors_and_may_request_only_its_share(personas):
    vis = user_visibility(user=personas.pi)
    assert names(vis.organizations()) == {"Acme Research"}
    assert names(vis.programs()) == {"Vision"}
    assert names(vis.projects()) == {"Detection"}
    assert vis.can_request(personas.project_a1)
    assert not vis.can_request(personas.project_a2)
    assert not vis.can_request(personas.program_a)
    assert not vis.can_manage(personas.program_a)
    # Their project's and their program's share rows (for the effective share), no sibling's.
    assert {str(a.node) for a in vis.allocations()} == {"Vision", "Detection"}


def test_researcher_sees_their_project_read_only(personas):
    vis = user_visibility(user=personas.researcher)
    assert names(vis.projects()) == {"Detection"}
    assert not vis.can_request(personas.project_a1)
    assert not vis.can_manage(personas.program_a)
    assert not vis.can_view_reports


def test_finance_sees_the_whole_organization_but_changes_nothing(personas):
    vis = user_visibility(user=personas.finance)
    assert names(vis.programs()) == {"Vision", "Language"}
    assert len(names(vis.projects())) == 4
    assert vis.can_view_reports
    assert not vis.can_manage(personas.organization)
    assert not vis.can_manage(personas.program_a)
    assert not any(vis.can_request(p) for p in personas.projects + personas.programs)


def test_outsider_and_anonymous_see_nothing(personas):
    for user in (personas.outsider, AnonymousUser()):
        vis = user_visibility(user=user)
        assert vis.is_empty
        assert not vis.organizations().exists()
        assert not vis.programs().exists()
        assert not vis.projects().exists()
        assert not vis.clusters().exists()
        assert not vis.allocations().exists()
        assert not vis.approval_requests().exists()
        assert not vis.can_manage(personas.organization)


def test_staff_status_alone_opens_nothing_in_the_tree(personas):
    personas.outsider.is_staff = True
    personas.outsider.save()
    assert user_visibility(user=personas.outsider).is_empty


def test_org_admin_sees_nothing_of_another_organization(personas):
    other = OrganizationFactory(name="Elsewhere")
    ProgramFactory(organization=other, name="Secret program")
    ClusterFactory(organization=other, name="a100")
    vis = user_visibility(user=personas.org_admin)
    assert "Secret program" not in names(vis.programs())
    assert "a100" not in names(vis.clusters())
    assert not vis.can_manage(other)


def test_nobody_may_decide_their_own_request_and_only_parent_managers_decide(personas):
    request = ApprovalRequestFactory(
        organization=personas.organization,
        program=personas.program_a,
        cluster=personas.cluster,
        requested_by=personas.program_manager,
    )
    assert not user_visibility(user=personas.program_manager).can_decide(request)
    assert user_visibility(user=personas.org_admin).can_decide(request)
    for name in ("pi", "researcher", "finance", "outsider"):
        assert not user_visibility(user=personas.users[name]).can_decide(request), name


def test_approval_requests_are_visible_to_requester_deciders_and_finance_only(personas):
    request = ApprovalRequestFactory(
        organization=personas.organization,
        program=personas.program_b,
        cluster=personas.cluster,
        requested_by=personas.org_admin,
    )
    seen_by = {
        name
        for name, user in personas.users.items()
        if user_visibility(user=user).approval_requests().filter(pk=request.pk).exists()
    }
    assert seen_by == {"org_admin", "finance"}


@pytest.mark.parametrize(
    ("persona", "submits_to", "simulates_in"),
    [
        ("org_admin", set(), {"Acme Research"}),
        ("program_manager", set(), {"Acme Research"}),
        ("pi", {"Detection"}, set()),
        ("researcher", {"Detection"}, set()),
        ("finance", set(), set()),
        ("outsider", set(), set()),
    ],
)
def test_who_submits_where_and_who_simulates_which_tree(
    personas, persona, submits_to, simulates_in
):
    """Only a project's own people submit to it (an admin does not on its behalf); org
    admins and program managers replay their organization's tree in the simulator."""
    vis = user_visibility(user=getattr(personas, persona))
    assert names(vis.submit_projects()) == submits_to
    assert names(vis.simulating_organizations()) == simulates_in


def test_simulations_shown_are_ones_own_and_those_of_an_administered_organization(personas):
    from scheduler.models import SimulationJob

    def job(user, organization):
        return SimulationJob.objects.create(
            created_by=user,
            organization=organization,
            cluster=personas.cluster,
            trace_source="philly",
            created_at=timezone.now(),
        )

    other = OrganizationFactory()
    mine = job(personas.program_manager, personas.organization)
    managers_elsewhere = job(personas.program_manager, other)
    admins = job(personas.org_admin, personas.organization)

    def shown(persona):
        vis = user_visibility(user=getattr(personas, persona))
        return set(SimulationJob.objects.filter(vis.simulations_q()))

    assert shown("program_manager") == {mine, managers_elsewhere}
    assert shown("org_admin") == {mine, admins}
    assert shown("pi") == set()
