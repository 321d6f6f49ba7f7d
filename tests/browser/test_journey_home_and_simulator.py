"""Journeys: each role lands on the answer to its first question, and a simulation started
without a broker (make run) runs in the background while its page shows the progress; at
1,280 and 390 px wide."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import Node, SimulationJob, SimulationJobState
from scheduler.services.workloads import workload_submit
from tests.browser.conftest import run_uploaded_simulation, sign_in, sign_out
from tests.browser.test_screenshots import out_dir, shoot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRACE = (
    "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"
    "a,2026-01-05T00:00:00,7200,8,detection,,\n"
    "b,2026-01-05T00:10:00,3600,4,segmentation,,\n"
    "c,2026-01-05T00:20:00,7200,8,detection,,\n"
)


@pytest.mark.parametrize("width", [1280, 390])
def test_each_role_lands_on_the_answer_to_its_first_question(
    page,
    live_server,
    world,
    out_dir,  # noqa: F811
    width,
):
    p = world
    Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8, last_heartbeat=timezone.now())
    Node.objects.create(cluster=p.cluster, name="gpu-2", gpus=8)  # never reported
    workload_submit(
        project=p.project_a1, cluster=p.cluster, name="eval", gpus=2, min_runtime_seconds=600,
        launch_spec={"command": ["eval"]}, submitted_by=p.researcher,
    )  # fmt: skip
    page.set_viewport_size({"width": width, "height": 900})

    sign_in(page, live_server, "researcher", p.password)
    queue = page.get_by_test_id("home-queue")
    expect(queue).to_contain_text("waiting (1 yours)")
    shoot(page, out_dir, f"39-home-researcher-{width}")
    queue.get_by_role("link", name="Submit a workload").click()
    expect(page.get_by_role("heading", name="Submit a workload")).to_be_visible()
    sign_out(page)

    sign_in(page, live_server, "pi", p.password)
    expect(page.get_by_test_id("home-delivery")).to_contain_text("Detection")
    sign_out(page)

    sign_in(page, live_server, "finance", p.password)
    expect(page.get_by_test_id("home-finance")).to_contain_text("GPU-hours used")
    shoot(page, out_dir, f"40-home-finance-{width}")
    sign_out(page)

    sign_in(page, live_server, "org_admin", p.password)
    nodes = page.get_by_test_id("home-nodes")
    expect(nodes).to_contain_text("1 of 2 nodes needs attention")
    nodes.get_by_role("link", name="gpu-2").click()
    expect(page.get_by_test_id("node-state")).to_have_text("Healthy")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_simulation_without_a_broker_runs_in_the_background_and_its_page_follows_it(
    page, live_server, world, settings, tmp_path, width
):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # as in make run: no broker
    p = world
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_server, "program_manager", p.password)
    run_uploaded_simulation(page, live_server, trace)
    job = SimulationJob.objects.get()
    # The page is back before the replay is done; it follows it and shows the comparison.
    expect(page.get_by_test_id("comparison")).to_be_visible(timeout=60_000)
    job.refresh_from_db()
    assert job.state == SimulationJobState.DONE, job.error
    expect(page.locator("[data-figure][data-drawn=true]").first).to_be_visible(timeout=30_000)
