"""Journey: a researcher with a long queue filters and sorts it, pages through it, submits
from its own page and cancels a workload after confirming, at 1,280 and 390 px wide."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.choices import WorkloadState
from scheduler.models import Node, Workload
from scheduler.services.workloads import workload_submit
from tests.browser.conftest import sign_in
from tests.browser.test_screenshots import out_dir, shoot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DASH = "\u2013"  # the en dash of the pager's ranges


@pytest.mark.parametrize("width", [1280, 390])
def test_researcher_filters_pages_submits_and_cancels_with_confirmation(
    page,
    live_server,
    world,
    out_dir,  # noqa: F811
    width,
):
    p = world
    Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    began = timezone.now() - timedelta(hours=3)
    for i in range(60):
        workload_submit(
            project=p.project_a1, cluster=p.cluster, name=f"sweep-{i:02d}", gpus=1 + i % 2,
            min_runtime_seconds=600, launch_spec={"command": ["python", "sweep.py", str(i)]},
            submitted_by=p.researcher if i % 3 else p.pi, now=began + timedelta(minutes=i),
        )  # fmt: skip
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_server, "researcher", p.password)
    page.goto(f"{live_server.url}/workloads/?live=0")
    pager = page.get_by_test_id("pager")
    expect(pager).to_contain_text(f"1{DASH}50 of 60 · page 1 of 2")

    # Only mine, oldest first: 40 of the 60 are the researcher's.
    page.get_by_label("Only mine").check()
    page.get_by_label("Sort", exact=True).select_option("oldest")
    page.get_by_role("button", name="Show").click()
    expect(pager).to_contain_text(f"1{DASH}40 of 40 · page 1 of 1")
    first_row = page.locator("tbody tr").first
    expect(first_row).to_contain_text("sweep-01")
    shoot(page, out_dir, f"35-my-queue-filtered-{width}")

    # Everyone's again, then the second page keeps the sort.
    page.get_by_label("Only mine").uncheck()
    page.get_by_role("button", name="Show").click()
    page.get_by_role("link", name="Next").click()
    expect(pager).to_contain_text(f"51{DASH}60 of 60 · page 2 of 2")
    expect(page.locator("tbody tr").first).to_contain_text("sweep-50")

    # Submit from its own page.
    page.get_by_test_id("submit-link").click()
    expect(page.get_by_role("heading", name="Submit a workload")).to_be_visible()
    page.get_by_label("Name").fill("one-more")
    page.get_by_label("Command").fill("python one_more.py")
    page.get_by_role("button", name="Submit").click()
    added = Workload.objects.get(name="one-more")
    page.wait_for_url(f"**/workloads/{added.pk}/")

    # Cancel asks first; "Keep it" keeps it, confirming cancels.
    page.get_by_role("link", name="Cancel this workload…").click()
    expect(page.get_by_test_id("cancel-effect")).to_contain_text("takes it out of the queue")
    shoot(page, out_dir, f"36-cancel-confirm-{width}")
    page.get_by_role("link", name="Keep it").click()
    added.refresh_from_db()
    assert added.state == WorkloadState.PENDING
    page.get_by_role("link", name="Cancel this workload…").click()
    page.get_by_role("button", name="Cancel one-more").click()
    expect(page.get_by_test_id("workload-state")).to_have_text("Cancelled")
    added.refresh_from_db()
    assert added.state == WorkloadState.CANCELLED
