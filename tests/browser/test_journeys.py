"""The main journeys of the budget pages in a real browser."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from governance.choices import ApprovalState
from governance.forms import start_of_day
from governance.models import ApprovalRequest
from governance.selectors.tree import share_at
from governance.services.allocations import allocation_split
from tests.browser.conftest import sign_in, sign_out

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def tree_row(page, name):
    return page.locator("[data-testid=tree-table] tbody tr").filter(
        has=page.locator("td.node", has_text=re.compile(rf"^{name}"))
    )


def test_program_manager_resplits_their_program(page, live_server, world):
    sign_in(page, live_server, "program_manager", world.password)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Budget tree").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("h100")
    # The sunburst is drawn by the self-hosted Plotly bundle.
    expect(page.locator("[data-figure][data-drawn=true]")).to_have_count(1)
    expect(tree_row(page, "Detection").locator("td.num").first).to_have_text("50.00 %")

    tree_row(page, "Vision").get_by_role("link", name="Edit split").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Split Vision among its projects")
    expect(page.get_by_test_id("split-sum")).to_have_text("80.00 %")
    detection = page.get_by_label("New share of Detection in percent")
    detection.fill("55")
    # The live sum and the unallocated rest follow the typing.
    expect(page.get_by_test_id("split-sum")).to_have_text("85.00 %")
    expect(page.get_by_test_id("split-rest")).to_have_text("15.00 %")
    detection.fill("75")
    expect(page.get_by_test_id("split-sum")).to_have_text("105.00 %")
    expect(page.get_by_text("Over 100 %: lower some shares before saving.")).to_be_visible()
    detection.fill("55")
    page.get_by_label("Reason").fill("Detection ships its model first.")
    page.get_by_role("button", name="Save the split").click()

    expect(page.locator(".messages")).to_contain_text("Detection 50.00 % → 55.00 %")
    expect(tree_row(page, "Detection").locator("td.num").first).to_have_text("55.00 %")
    expect(tree_row(page, "Unallocated in Vision").locator("td.num").first).to_have_text("15.00 %")
    tree_row(page, "Detection").get_by_role("link", name="History").click()
    history = page.get_by_test_id("history-table").first
    expect(history.locator("tbody tr").first).to_contain_text("Detection ships its model first.")
    expect(history.locator("tbody tr").first).to_contain_text("+5.00 pp")
    assert share_at(node=world.project_a1, cluster=world.cluster) == Decimal("55.00")


def test_picking_a_start_day_shows_the_shares_in_force_that_day(page, live_server, world):
    start = timezone.localdate() + timedelta(days=5)
    allocation_split(
        actor=world.program_manager, parent=world.program_a, cluster=world.cluster,
        percents={world.project_a2: Decimal("20")}, reason="Segmentation winds down.",
        valid_from=start_of_day(timezone.localdate() + timedelta(days=3)),
    )  # fmt: skip
    sign_in(page, live_server, "program_manager", world.password)
    page.goto(f"{live_server.url}/clusters/{world.cluster.pk}/split/program/{world.program_a.pk}/")
    expect(page.get_by_test_id("split-sum")).to_have_text("80.00 %")

    page.get_by_label("Valid from").fill(start.isoformat())
    page.get_by_label("Valid from").dispatch_event("change")

    expect(page.get_by_test_id("shown-day")).to_contain_text(start.isoformat())
    expect(page.get_by_test_id("split-sum")).to_have_text("70.00 %")
    expect(page.get_by_label("Valid from")).to_have_value(start.isoformat())


def test_bad_input_in_the_split_editor_is_shown_and_nothing_saved(page, live_server, world):
    sign_in(page, live_server, "program_manager", world.password)
    page.goto(f"{live_server.url}/clusters/{world.cluster.pk}/split/program/{world.program_a.pk}/")
    page.get_by_label("New share of Segmentation in percent").fill("130")
    page.get_by_role("button", name="Save the split").click()
    expect(page.get_by_text("Must be between 0 and 100.")).to_be_visible()
    expect(
        page.get_by_text("Say why the shares change; it is kept in the history.")
    ).to_be_visible()
    assert share_at(node=world.project_a2, cluster=world.cluster) == Decimal("30.00")


def test_pi_requests_a_change_and_the_manager_approves_it(page, live_server, world):
    sign_in(page, live_server, "pi", world.password)
    page.get_by_role("link", name="Open the h100 tree").click()
    tree_row(page, "Vision").get_by_role("link", name="Request a change").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Request a change to Vision's split")
    page.get_by_label("New share of Detection in percent").fill("60")
    page.get_by_label("Reason").fill("Paper deadline in May.")
    page.get_by_role("button", name="Send the request").click()
    expect(page.get_by_test_id("state")).to_have_text("Submitted")
    request = ApprovalRequest.objects.get()
    sign_out(page)

    sign_in(page, live_server, "program_manager", world.password)
    inbox = page.get_by_role("navigation", name="Main").get_by_role(
        "link", name=re.compile("Inbox")
    )
    expect(inbox.get_by_test_id("inbox-count")).to_have_text("1")
    inbox.click()
    page.get_by_role("link", name=f"#{request.pk} · Vision").click()
    expect(page.get_by_test_id("request-history")).to_contain_text("Submitted")
    # Before deciding, the manager sees the split the request would leave.
    expect(page.get_by_test_id("outcome")).to_contain_text("Segmentation")
    expect(page.get_by_test_id("outcome-total")).to_have_text("90.00 %")
    page.get_by_label("Note to the requester (optional)").fill(
        "Go ahead, good luck with the paper."
    )
    page.get_by_role("button", name="Approve").click()

    expect(page.get_by_test_id("state")).to_have_text("Applied")
    expect(page.get_by_test_id("request-history")).to_contain_text("Go ahead")
    expect(inbox.get_by_test_id("inbox-count")).to_have_text("0")
    request.refresh_from_db()
    assert request.state == ApprovalState.APPLIED
    assert share_at(node=world.project_a1, cluster=world.cluster) == Decimal("60.00")


def test_outsider_sees_a_404_page_in_the_layout(page, live_server, world):
    sign_in(page, live_server, "outsider", world.password)
    expect(page.get_by_test_id("no-role")).to_be_visible()
    response = page.goto(f"{live_server.url}/clusters/{world.cluster.pk}/tree/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Nothing here")).to_be_visible()
