"""Read-only pages: home, the tree, a node's history, error pages — per persona."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.factories import (
    AllocationFactory,
    ApprovalDecisionFactory,
    ApprovalLineFactory,
    ApprovalRequestFactory,
    ClusterFactory,
    OrganizationFactory,
    ProgramFactory,
)
from tests.page_assets import off_site_assets

pytestmark = pytest.mark.django_db


def signed_in(client, user):
    client.force_login(user)
    return client


def tree_url(personas):
    return reverse("tree", args=[personas.cluster.pk])


# ---- Sign-in pages ----------------------------------------------------------------------


def test_login_page_renders_in_the_product_layout(client):
    response = client.get(reverse("account_login"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "GPU-hour budgets" in body
    assert "Username or e-mail" in body
    assert 'href="/static/css/app.css"' in body


def test_pages_need_sign_in(client, personas):
    for url in [reverse("home"), tree_url(personas), reverse("approval-inbox")]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("account_login"))


@pytest.mark.parametrize("login", ["program_manager", "program_manager@example.org"])
def test_persona_signs_in_by_username_or_email(client, personas, login):
    response = client.post(
        reverse("account_login"), {"login": login, "password": personas.password}, follow=True
    )
    assert response.status_code == 200
    assert response.context["user"].username == "program_manager"
    assert "Budget tree" in response.content.decode()


def test_wrong_password_shows_the_form_again_with_a_message(client, personas):
    response = client.post(
        reverse("account_login"), {"login": "pi", "password": "wrong"}, follow=True
    )
    assert response.status_code == 200
    assert not response.context["user"].is_authenticated
    assert "not correct" in response.content.decode()


def test_password_reset_pages_render(client, personas, mailoutbox):
    response = client.get(reverse("account_reset_password"))
    assert response.status_code == 200
    assert "Reset your password" in response.content.decode()
    response = client.post(
        reverse("account_reset_password"), {"email": "pi@example.org"}, follow=True
    )
    assert "Check your e-mail" in response.content.decode()
    assert len(mailoutbox) == 1


def test_logout_asks_for_confirmation(client, personas):
    signed_in(client, personas.pi)
    response = client.get(reverse("account_logout"))
    assert response.status_code == 200
    assert "Sign out of GPU-hour budgets" in response.content.decode()
    client.post(reverse("account_logout"))
    assert client.get(reverse("home")).status_code == 302


# ---- Home and navigation ----------------------------------------------------------------


def test_home_tells_a_program_manager_what_they_can_do(client, personas):
    response = signed_in(client, personas.program_manager).get(reverse("home"))
    body = response.content.decode()
    assert response.status_code == 200
    assert "Program manager" in body
    assert "Split your program among its projects" in body
    labels = [item["label"] for item in response.context["nav_items"]]
    assert labels[:4] == ["Home", "Budget tree", "Inbox", "My requests"]


def test_navigation_counts_requests_waiting_in_the_inbox(client, personas):
    request = ApprovalRequestFactory(
        organization=personas.organization,
        program=personas.program_a,
        cluster=personas.cluster,
        requested_by=personas.pi,
    )
    ApprovalLineFactory(request=request, project=personas.project_a1)
    response = signed_in(client, personas.program_manager).get(reverse("home"))
    inbox = next(i for i in response.context["nav_items"] if i["label"] == "Inbox")
    assert inbox["count"] == 1
    assert response.context["inbox_count"] == 1


def test_researcher_and_finance_have_no_inbox_in_navigation(client, personas):
    for persona in (personas.researcher, personas.finance):
        response = signed_in(client, persona).get(reverse("home"))
        labels = [item["label"] for item in response.context["nav_items"]]
        assert "Budget tree" in labels
        assert "Inbox" not in labels and "My requests" not in labels


def test_outsider_home_says_how_to_get_a_role(client, personas):
    response = signed_in(client, personas.outsider).get(reverse("home"))
    assert response.status_code == 200
    assert "You have no role in the budget tree yet" in response.content.decode()
    assert [i["label"] for i in response.context["nav_items"]] == ["Home"]


# ---- The tree ---------------------------------------------------------------------------


def test_tree_index_goes_straight_to_the_only_cluster(client, personas):
    response = signed_in(client, personas.org_admin).get(reverse("tree-index"))
    assert response.status_code == 302
    assert response["Location"] == tree_url(personas)


def test_tree_index_lets_the_user_pick_among_several_clusters(client, personas):
    ClusterFactory(organization=personas.organization, name="b200", slug="b200")
    response = signed_in(client, personas.org_admin).get(reverse("tree-index"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "h100" in body and "b200" in body


def test_org_admin_sees_every_node_with_shares_gpus_and_the_rest(client, personas):
    response = signed_in(client, personas.org_admin).get(tree_url(personas))
    assert response.status_code == 200
    body = response.content.decode()
    for name in ["Acme Research", "Vision", "Language", "Detection", "Summaries"]:
        assert name in body
    # Detection: 50 % of Vision's 60 % = 30 % of 32 GPUs = 9.6 GPUs.
    assert "50.00 %" in body and "30.00 %" in body and "9.6" in body
    assert "Unallocated in Vision" in body
    labels = [row.label for row in response.context["rows"]]
    assert labels.index("Unallocated in Vision") == labels.index("Segmentation") + 1
    assert "Edit split" in body


def test_tree_shows_who_manages_each_node(client, personas):
    response = signed_in(client, personas.org_admin).get(tree_url(personas))
    rows = {row.label: row for row in response.context["rows"]}
    assert personas.program_manager in rows["Vision"].managers
    assert personas.org_admin in rows["Acme Research"].managers


def test_tree_carries_the_sunburst_figure_for_plotly(client, personas):
    response = signed_in(client, personas.org_admin).get(tree_url(personas))
    body = response.content.decode()
    assert 'id="tree-figure"' in body
    assert "/static/vendor/plotly/plotly-governance.min.js" in body
    assert off_site_assets(body) == []
    trace = response.context["figure"]["data"][0]
    assert trace["type"] == "sunburst"
    assert "Detection" in trace["labels"]


def test_program_manager_sees_their_program_but_not_the_other(client, personas):
    response = signed_in(client, personas.program_manager).get(tree_url(personas))
    labels = [row.label for row in response.context["rows"]]
    assert "Vision" in labels and "Detection" in labels
    assert "Language" not in labels and "Translation" not in labels
    rows = {row.label: row for row in response.context["rows"]}
    assert rows["Vision"].split_label == "Edit split"
    assert rows["Acme Research"].split_label == "Request a change"


def test_pi_sees_their_project_and_may_request_a_change(client, personas):
    response = signed_in(client, personas.pi).get(tree_url(personas))
    labels = [row.label for row in response.context["rows"]]
    assert labels == ["Acme Research", "Vision", "Detection"]
    rows = {row.label: row for row in response.context["rows"]}
    assert rows["Vision"].split_label == "Request a change"
    assert "not shown" in response.content.decode()


def test_researcher_and_finance_read_the_tree_without_edit_links(client, personas):
    for persona in (personas.researcher, personas.finance):
        response = signed_in(client, persona).get(tree_url(personas))
        assert response.status_code == 200
        assert all(not row.split_url for row in response.context["rows"])
    finance = signed_in(client, personas.finance).get(tree_url(personas))
    assert "Translation" in finance.content.decode()


def test_outsider_gets_404_for_the_tree(client, personas):
    response = signed_in(client, personas.outsider).get(tree_url(personas))
    assert response.status_code == 404
    assert "Nothing here" in response.content.decode()


def test_tree_of_a_cluster_that_does_not_exist_is_404(client, personas):
    response = signed_in(client, personas.org_admin).get(reverse("tree", args=[999999]))
    assert response.status_code == 404


def test_tree_as_of_a_past_date_shows_the_shares_then(client, personas):
    AllocationFactory(
        cluster=personas.cluster,
        program=None,
        project=personas.project_a1,
        percent=Decimal("65.00"),
        valid_from=timezone.now() - timedelta(days=2),
        set_by=personas.org_admin,
    )
    client = signed_in(client, personas.org_admin)
    now_rows = {r.label: r for r in client.get(tree_url(personas)).context["rows"]}
    assert now_rows["Detection"].share == Decimal("65.00")
    day = (timezone.localdate() - timedelta(days=10)).isoformat()
    past = client.get(tree_url(personas), {"at": day})
    past_rows = {r.label: r for r in past.context["rows"]}
    assert past_rows["Detection"].share == Decimal("50.00")
    assert day in past.content.decode()


def test_tree_with_a_malformed_date_says_so_and_shows_today(client, personas):
    response = signed_in(client, personas.org_admin).get(tree_url(personas), {"at": "tomorrow"})
    assert response.status_code == 200
    assert "Enter a date as YYYY-MM-DD" in response.content.decode()
    assert response.context["at"] is None


def test_cluster_picker_switches_to_the_chosen_cluster(client, personas):
    other = ClusterFactory(organization=personas.organization, name="b200", slug="b200")
    response = signed_in(client, personas.org_admin).get(tree_url(personas), {"cluster": other.pk})
    assert response.status_code == 302
    assert response["Location"] == reverse("tree", args=[other.pk])


def test_cluster_of_another_organization_is_404(client, personas):
    foreign = ClusterFactory(organization=OrganizationFactory())
    response = signed_in(client, personas.org_admin).get(reverse("tree", args=[foreign.pk]))
    assert response.status_code == 404


# ---- History ----------------------------------------------------------------------------


def history_url(kind, node, cluster=None):
    url = reverse("history", args=[kind, node.pk])
    return f"{url}?cluster={cluster.pk}" if cluster else url


def test_history_lists_who_changed_what_when_and_why(client, personas):
    AllocationFactory(
        cluster=personas.cluster,
        program=None,
        project=personas.project_a1,
        percent=Decimal("55.00"),
        valid_from=timezone.now() - timedelta(hours=1),
        set_by=personas.program_manager,
        reason="Paper deadline for Detection.",
    )
    response = signed_in(client, personas.researcher).get(
        history_url("project", personas.project_a1, personas.cluster)
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "Paper deadline for Detection." in body
    assert "program_manager" in body
    assert "55.00 %" in body and "+5.00 pp" in body
    entries = response.context["sections"][0]["entries"]
    assert [e.allocation.percent for e in entries] == [Decimal("55.00"), Decimal("50.00")]


def test_history_of_a_node_without_shares_says_it_holds_nothing(client, personas):
    program = ProgramFactory(organization=personas.organization, name="Robotics")
    response = signed_in(client, personas.org_admin).get(history_url("program", program))
    assert response.status_code == 200
    assert "No share set on h100" in response.content.decode()


def test_history_of_an_invisible_node_is_404(client, personas):
    client = signed_in(client, personas.pi)
    assert client.get(history_url("project", personas.project_a2)).status_code == 404
    assert client.get(history_url("program", personas.program_b)).status_code == 404
    assert client.get(reverse("history", args=["organization", 1])).status_code == 404
    assert client.get(reverse("history", args=["cluster", 1])).status_code == 404


def test_history_links_the_request_behind_a_change(client, personas):
    request = ApprovalRequestFactory(
        organization=personas.organization,
        program=personas.program_a,
        cluster=personas.cluster,
        requested_by=personas.pi,
        state="applied",
    )
    ApprovalDecisionFactory(request=request)
    AllocationFactory(
        cluster=personas.cluster,
        program=None,
        project=personas.project_a1,
        percent=Decimal("60.00"),
        set_by=personas.program_manager,
        approval_request=request,
    )
    response = signed_in(client, personas.pi).get(history_url("project", personas.project_a1))
    assert reverse("approval-detail", args=[request.pk]) in response.content.decode()
