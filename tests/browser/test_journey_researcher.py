"""Journey: a researcher submits a workload on "My queue" and, after the next scheduling
cycle, sees its state, the engine's reason and an estimated start — without reloading."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import Node, Workload
from scheduler.selectors.queue_positions import queue_positions
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.workloads import workload_submit
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_researcher_submits_and_sees_the_reason_and_estimate(page, live_server, world):
    p = world
    Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    # The PI's 8-GPU run holds the only node for 2 hours, protected for the first hour.
    workload_submit(
        project=p.project_a1, cluster=p.cluster, name="pi-training", gpus=8,
        min_runtime_seconds=3600, launch_spec={"command": ["train"]},
        declared_duration_seconds=7200, submitted_by=p.pi,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=p.cluster.id)

    sign_in(page, live_server, "researcher", p.password)
    page.get_by_role("link", name="Workloads").click()
    expect(page.get_by_role("heading", name="My queue")).to_be_visible()
    page.get_by_role("link", name="Submit a workload").click()
    expect(page.get_by_role("heading", name="Submit a workload")).to_be_visible()
    page.get_by_label("Name").fill("eval-sweep")
    page.get_by_label("Project").select_option(str(p.project_a1.pk))
    page.get_by_label("GPUs").fill("4")
    page.get_by_label("Minimum runtime (minutes)").fill("20")
    page.get_by_label("Expected duration (minutes)").fill("45")
    page.get_by_label("Command").fill("python eval.py --sweep 3")
    page.get_by_role("button", name="Submit").click()

    workload = Workload.objects.get(name="eval-sweep")
    page.wait_for_url(f"**/workloads/{workload.pk}/")
    expect(page.get_by_test_id("workload-state")).to_have_text("Pending")
    page.evaluate("window.__notReloaded = true")

    scheduling_cycle_run(cluster_id=p.cluster.id, now=timezone.now())
    workload.refresh_from_db()
    assert workload.reason  # the engine said why it waits

    said = workload.reason[:1].upper() + workload.reason[1:]
    # The queue card refreshes in place (poll.js) and shows the engine's own words.
    reason = page.get_by_test_id("reason")
    expect(reason).to_contain_text(said, timeout=20_000)
    expect(reason).to_contain_text(f"Position {queue_positions([workload])[workload.id]}")
    expect(page.get_by_test_id("estimate")).to_contain_text("Expected to start")
    expect(page.get_by_text("assumes running work ends as declared")).to_be_visible()
    assert page.evaluate("window.__notReloaded === true")

    page.get_by_role("link", name="My queue").click()
    row = page.get_by_test_id(f"workload-{workload.pk}")
    expect(row.get_by_test_id("state")).to_have_text("Pending")
    expect(row.get_by_test_id("reason")).to_have_text(said)
    # A wait of an hour or so is shown as a range (a short one as "≈ time").
    expect(row.get_by_test_id("estimate")).to_contain_text(re.compile(r"≈|between"))
