"""Journey: the idle rule marks a run idle, and the org admin finds it on cluster health and on
its workload's page, with the utilization charts.

The personas' cluster with one node; Detection's 4-GPU training started three hours ago
(minimum runtime 10 minutes). Its agent reports every 10 minutes through the agents' own
service: 70 % busy for the first 90 minutes, then 1 % — the last 90 minutes hold only idle
hours, so the idle rule (default: < 5 % for 30 minutes) marks it when it runs now.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import Run
from scheduler.services.utilization import idle_rule_apply, utilization_report
from scheduler.services.workloads import workload_submit
from tests.browser.conftest import sign_in
from tests.browser.test_csp import RECORD_VIOLATIONS
from tests.scheduler.agent_api import started_run
from tests.scheduler.test_utilization_store import item, node_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GPUS = 4
PERIOD = timedelta(minutes=10)


def idle_training(world):
    """The run, its telemetry and the idle rule applied now; returns the run."""
    node = node_of(world.cluster, "gpu-node-1")
    workload = workload_submit(
        project=world.project_a1,
        cluster=world.cluster,
        name="detector-sweep-17",
        gpus=GPUS,
        min_runtime_seconds=600,
        launch_spec={"command": ["python", "sweep.py"]},
        submitted_by=world.researcher,
    )
    run = started_run(workload, node)
    now = timezone.now()
    started = now - timedelta(hours=3)
    Run.objects.filter(pk=run.pk).update(started_at=started, accounted_until=started)
    run.refresh_from_db()
    periods, at = [], started
    while at + PERIOD <= now:
        allocated = Decimal(GPUS * 600)
        share = Decimal("0.7") if at < started + timedelta(minutes=90) else Decimal("0.01")
        periods.append(item(run, at, at + PERIOD, allocated, allocated * share, samples=120))
        at += PERIOD
    utilization_report(node=node, reports=periods, now=now)
    assert idle_rule_apply(cluster=world.cluster, now=now)["marked"] == 1
    run.refresh_from_db()
    return run


def test_org_admin_finds_the_idle_run_on_cluster_health_and_its_page(page, live_server, world):
    run = idle_training(world)
    page.add_init_script(RECORD_VIOLATIONS)  # the charts drawn under the page's policy
    sign_in(page, live_server, "org_admin", world.password)

    page.goto(f"{live_server.url}/dashboards/health/")
    expect(page.get_by_test_id("pyramid-tiles").get_by_test_id("utilization")).not_to_have_text("—")
    idle_runs = page.get_by_test_id("idle-runs")
    expect(idle_runs).to_contain_text("detector-sweep-17")
    expect(idle_runs).to_contain_text("Detection")
    expect(page.get_by_test_id("telemetry-coverage")).to_be_visible()
    chart = page.locator('[data-figure="health-utilization"]')
    expect(chart).to_have_attribute("data-drawn", "true", timeout=30_000)
    expect(chart.locator("svg.main-svg").first).to_be_visible()
    rows = page.get_by_test_id("utilization-projects")
    expect(rows.locator("tr", has_text="Detection")).to_be_visible()

    idle_runs.get_by_role("link", name="detector-sweep-17").click()
    page.wait_for_url(f"**/workloads/{run.workload_id}/")
    flag = page.get_by_test_id("idle")
    expect(flag).to_contain_text("Idle since")
    expect(flag).to_contain_text("first workload preempted")
    trace = page.locator('[data-figure="run-utilization"]')
    expect(trace).to_have_attribute("data-drawn", "true", timeout=30_000)
    expect(page.get_by_test_id("utilization-summary")).to_contain_text("allocated but idle")
    assert page.evaluate("window.__cspViolations") == []


def test_a_researcher_of_another_project_does_not_see_the_idle_run(page, live_server, world):
    from tests.factories import researcher_of

    idle_training(world)
    researcher_of(world.project_b1, world.outsider)  # now a member of Translation only
    sign_in(page, live_server, "outsider", world.password)
    page.goto(f"{live_server.url}/dashboards/health/")
    expect(page.get_by_test_id("utilization-level")).to_be_visible()
    expect(page.get_by_test_id("no-idle-runs")).to_be_visible()
    expect(page.locator("body")).not_to_contain_text("detector-sweep-17")
