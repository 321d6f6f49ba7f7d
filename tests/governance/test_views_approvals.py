"""Approval pages: inbox, my requests, request detail, and the approve/reject/withdraw flows."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from governance.choices import ApprovalState, DecisionAction
from governance.selectors.tree import share_at
from governance.services.approvals import approval_request_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def pi_request(personas):
    """The PI asks for 60 % of Vision for Detection (50 % today)."""
    return approval_request_create(
        actor=personas.pi,
        parent=personas.program_a,
        cluster=personas.cluster,
        percents={personas.project_a1: Decimal("60")},
        reason="Paper deadline in May.",
    )


def detail(pk):
    return reverse("approval-detail", args=[pk])


def test_inbox_lists_the_request_for_the_program_manager(client, personas, pi_request):
    client.force_login(personas.program_manager)
    response = client.get(reverse("approval-inbox"))
    assert response.status_code == 200
    body = response.content.decode()
    assert f"#{pi_request.pk} · Vision" in body
    assert "50.00 % → <strong>60.00 %</strong>" in body
    assert 'data-testid="inbox-count">1<' in body


def test_empty_inbox_says_what_will_appear_there(client, personas):
    client.force_login(personas.program_manager)
    response = client.get(reverse("approval-inbox"))
    assert "Nothing waits for you" in response.content.decode()


def test_my_requests_lists_the_pis_request_and_empty_state(client, personas, pi_request):
    client.force_login(personas.pi)
    body = client.get(reverse("my-requests")).content.decode()
    assert f"#{pi_request.pk} · Vision" in body and "Submitted" in body
    client.force_login(personas.program_manager)
    body = client.get(reverse("my-requests")).content.decode()
    assert "You have not asked for a change yet" in body


def test_detail_shows_lines_state_history_and_decider_buttons(client, personas, pi_request):
    client.force_login(personas.program_manager)
    response = client.get(detail(pi_request.pk))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Detection" in body and "+10.00 pp" in body
    assert "Paper deadline in May." in body
    assert ">Submitted<" in body
    assert reverse("approval-approve", args=[pi_request.pk]) in body
    assert reverse("approval-reject", args=[pi_request.pk]) in body
    assert reverse("approval-withdraw", args=[pi_request.pk]) not in body
    actions = [d.action for d in response.context["decisions"]]
    assert actions == [DecisionAction.CREATE, DecisionAction.SUBMIT]


def test_requester_sees_withdraw_but_not_decide(client, personas, pi_request):
    client.force_login(personas.pi)
    body = client.get(detail(pi_request.pk)).content.decode()
    assert reverse("approval-withdraw", args=[pi_request.pk]) in body
    assert reverse("approval-approve", args=[pi_request.pk]) not in body


def test_manager_approves_and_the_share_applies_now(client, personas, pi_request):
    client.force_login(personas.program_manager)
    response = client.post(
        reverse("approval-approve", args=[pi_request.pk]), {"approve-comment": "Go ahead."}
    )
    assert response.status_code == 302
    pi_request.refresh_from_db()
    assert pi_request.state == ApprovalState.APPLIED
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("60.00")
    body = client.get(response["Location"]).content.decode()
    assert f"Request #{pi_request.pk} approved." in body
    assert "Go ahead." in body
    assert client.get(reverse("approval-inbox")).context["requests"].count() == 0


def test_reject_needs_a_comment_and_changes_nothing_without_one(client, personas, pi_request):
    client.force_login(personas.program_manager)
    url = reverse("approval-reject", args=[pi_request.pk])
    response = client.post(url, {"reject-comment": ""})
    assert response.status_code == 200
    assert "Say why you reject it" in response.content.decode()
    pi_request.refresh_from_db()
    assert pi_request.state == ApprovalState.SUBMITTED
    response = client.post(url, {"reject-comment": "Not this quarter."})
    assert response.status_code == 302
    pi_request.refresh_from_db()
    assert pi_request.state == ApprovalState.REJECTED
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("50.00")


def test_deciding_an_already_decided_request_shows_the_reason(client, personas, pi_request):
    client.force_login(personas.program_manager)
    client.post(reverse("approval-reject", args=[pi_request.pk]), {"reject-comment": "No."})
    response = client.post(reverse("approval-approve", args=[pi_request.pk]), {})
    assert response.status_code == 200
    assert response.context["approve_form"].non_field_errors()
    pi_request.refresh_from_db()
    assert pi_request.state == ApprovalState.REJECTED


def test_requester_cannot_approve_their_own_request(client, personas, pi_request):
    client.force_login(personas.pi)
    response = client.post(reverse("approval-approve", args=[pi_request.pk]), {})
    assert response.status_code == 403
    pi_request.refresh_from_db()
    assert pi_request.state == ApprovalState.SUBMITTED


def test_finance_sees_the_request_but_may_not_decide(client, personas, pi_request):
    client.force_login(personas.finance)
    page = client.get(detail(pi_request.pk))
    assert page.status_code == 200
    assert page.context["may_decide"] is False
    response = client.post(reverse("approval-approve", args=[pi_request.pk]), {})
    assert response.status_code == 403


def test_requester_withdraws(client, personas, pi_request):
    client.force_login(personas.pi)
    response = client.post(
        reverse("approval-withdraw", args=[pi_request.pk]), {"withdraw-comment": "Not needed."}
    )
    assert response.status_code == 302
    pi_request.refresh_from_db()
    assert pi_request.state == ApprovalState.WITHDRAWN
    body = client.get(detail(pi_request.pk)).content.decode()
    assert ">Withdrawn<" in body and "Not needed." in body


def test_request_invisible_to_the_user_is_404(client, personas, pi_request):
    for persona in (personas.outsider, personas.researcher):
        client.force_login(persona)
        assert client.get(detail(pi_request.pk)).status_code == 404
        response = client.post(reverse("approval-approve", args=[pi_request.pk]), {})
        assert response.status_code == 404
    client.force_login(personas.program_manager)
    assert client.get(detail(999999)).status_code == 404


def test_decision_urls_refuse_get(client, personas, pi_request):
    client.force_login(personas.program_manager)
    assert client.get(reverse("approval-approve", args=[pi_request.pk])).status_code == 405


def test_decider_sees_the_split_and_sums_the_request_would_leave(client, personas, pi_request):
    client.force_login(personas.program_manager)
    page = client.get(detail(pi_request.pk))
    outcome = page.context["outcome"]
    rows = {row.node.name: (row.before, row.after) for row in outcome.rows}
    # Vision today: Detection 50 + Segmentation 30 = 80 %; with the request 60 + 30 = 90 %.
    assert rows == {"Detection": (50, 60), "Segmentation": (30, 30)}
    assert (outcome.outcome.total_before, outcome.outcome.total_after) == (80, 90)
    assert outcome.outcome.rest_after == 10 and outcome.outcome.fits
    body = page.content.decode()
    assert 'data-testid="outcome-total"><strong>90.00 %' in body
    assert 'data-testid="outcome-over"' not in body


def test_a_request_past_100_percent_is_flagged_before_the_decision(client, personas):
    too_big = approval_request_create(
        actor=personas.pi,
        parent=personas.program_a,
        cluster=personas.cluster,
        percents={personas.project_a1: Decimal("75")},
        reason="Everything.",
    )
    client.force_login(personas.program_manager)
    page = client.get(detail(too_big.pk))
    assert page.context["outcome"].outcome.total_after == 105
    assert "would sum to 105.00 %" in page.content.decode()


def test_the_requester_sees_siblings_they_cannot_see_only_as_a_sum(client, personas, pi_request):
    client.force_login(personas.pi)
    outcome = client.get(detail(pi_request.pk)).context["outcome"]
    assert [row.node.name for row in outcome.rows] == ["Detection"]
    assert (outcome.hidden_count, outcome.hidden_before, outcome.hidden_after) == (1, 30, 30)
