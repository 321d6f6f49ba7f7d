"""Journey: a manager re-splits their program and the dashboard changes after the next rollup.

The personas' cluster (4 x 8 GPUs, all healthy) with Detection asking for all 32 GPUs, so its
owed GPU-hours equal its entitlement. Accounting runs for the hour before the split with the
baseline shares (Detection: 50 % of Vision's 60 % = 30 % of 32 GPUs = 9.6 GPU-hours), the
manager moves Detection to 55 % in the split editor (33 % of the cluster), the next rollup
(the accounting service the Celery beat calls) accounts the time since — and the
owed-vs-delivered page shows the larger entitlement.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from governance.models import Allocation
from scheduler.models import AccountingCursor
from scheduler.services.usage import usage_account
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def detection_row(page):
    return page.get_by_test_id("delivery-table").locator("tr", has_text="Detection")


def test_manager_resplits_and_sees_the_dashboard_change_after_the_rollup(
    page, live_server, world_with_usage
):
    world = world_with_usage  # one hour at 30 % accounted
    cluster = world.cluster
    accounted_until = AccountingCursor.objects.get(cluster=cluster).accounted_until

    sign_in(page, live_server, "program_manager", world.password)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboards").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Owed vs delivered")
    expect(page.locator("[data-figure][data-drawn=true]")).to_have_count(2)
    # 30 % of 32 GPUs for one hour.
    expect(detection_row(page).get_by_test_id("entitled")).to_have_text("9.6")
    expect(detection_row(page).get_by_test_id("owed")).to_have_text("9.6")

    page.goto(f"{live_server.url}/clusters/{cluster.pk}/split/program/{world.program_a.pk}/")
    page.get_by_label("New share of Detection in percent").fill("55")
    page.get_by_label("Reason").fill("Detection ships its model first.")
    page.get_by_role("button", name="Save the split").click()
    expect(page.locator(".messages")).to_contain_text("Detection 50.00 % → 55.00 %")

    # The next rollup: from the end of the last pass until the split at 30 %, then until
    # now at 55 % of 60 % = 33 % (entitlement follows the share from its instant).
    now = timezone.now()
    usage_account(cluster=cluster, now=now)
    split_at = Allocation.objects.filter(project=world.project_a1).latest("id").valid_from
    before = Decimal((split_at - accounted_until).total_seconds())
    after = Decimal((now - split_at).total_seconds())
    expected = (
        Decimal("34560") + Decimal("0.30") * 32 * before + Decimal("0.33") * 32 * after
    ) / 3600
    rounded = round(expected, 1)  # the page's format: one decimal, whole numbers bare
    shown = f"{int(rounded):,}" if rounded == rounded.to_integral_value() else f"{rounded:,.1f}"

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboards").click()
    expect(detection_row(page).get_by_test_id("entitled")).to_have_text(shown)
    expect(detection_row(page).get_by_test_id("owed")).to_have_text(shown)
    assert expected > Decimal("9.6")


def test_a_dashboards_custom_dates_show_and_are_sent_only_for_custom(
    page, live_server, world_with_usage
):
    sign_in(page, live_server, "program_manager", world_with_usage.password)
    page.goto(f"{live_server.url}/dashboards/delivery/")
    start, end = page.locator("#id_start"), page.locator("#id_end")
    expect(start).to_be_hidden()
    page.locator("#id_period").select_option("custom")
    expect(start).to_be_visible()
    expect(end).to_be_visible()
    # Another period is submitted at once, without the custom dates it does not use.
    page.locator("#id_period").select_option("30d")
    page.wait_for_url("**period=30d**")
    assert "start=" not in page.url and "end=" not in page.url
    expect(start).to_be_hidden()
