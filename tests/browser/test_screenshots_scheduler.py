"""Screenshots of My queue (with estimated starts), the simulator form and a finished
simulation, in headless Chromium.

``UPDATE_SCREENSHOTS=1`` writes them to ``docs/screenshots/30-…``; otherwise to a temporary
directory, so the suite still checks each page renders and fits a narrow screen.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import Node
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.simulations import simulation_job_create, simulation_job_run
from scheduler.services.workloads import workload_submit
from tests.browser.conftest import sign_in, sign_out
from tests.browser.test_screenshots import out_dir, shoot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _queue(p) -> None:
    """Two 8-GPU nodes: three runs hold them; four workloads wait with estimates."""
    for i in (1, 2):
        Node.objects.create(cluster=p.cluster, name=f"gpu-{i}", gpus=8)
    began = timezone.now() - timedelta(minutes=50)

    def submit(name, project, user, gpus, minutes, *, duration=None, at=began):
        return workload_submit(
            project=project, cluster=p.cluster, name=name, gpus=gpus,
            min_runtime_seconds=minutes * 60, launch_spec={"command": ["python", f"{name}.py"]},
            declared_duration_seconds=duration, submitted_by=user, now=at,
        )  # fmt: skip

    submit("detector-pretrain", p.project_a1, p.pi, 8, 120, duration=3 * 3600)
    submit("seg-baseline", p.project_a2, p.program_manager, 4, 60, duration=90 * 60)
    submit("translate-large", p.project_b1, p.org_admin, 4, 60)
    scheduling_cycle_run(cluster_id=p.cluster.id, now=began)
    later = began + timedelta(minutes=20)
    submit("eval-sweep", p.project_a1, p.researcher, 4, 20, duration=45 * 60, at=later)
    submit("ablation-a", p.project_a1, p.researcher, 8, 60, duration=2 * 3600, at=later)
    submit("debug-loader", p.project_a1, p.researcher, 1, 10, duration=15 * 60, at=later)
    scheduling_cycle_run(cluster_id=p.cluster.id, now=timezone.now())


def test_screenshots_of_my_queue_and_the_simulator(page, live_server, world, out_dir):  # noqa: F811
    p = world
    _queue(p)
    base = live_server.url

    sign_in(page, live_server, "researcher", p.password)
    page.goto(f"{base}/workloads/?mine=1&live=0")
    expect(page.get_by_test_id("caveat")).to_be_visible()
    shoot(page, out_dir, "30-my-queue")
    page.get_by_role("link", name="eval-sweep").click()
    expect(page.get_by_test_id("estimate")).to_be_visible()
    shoot(page, out_dir, "31-workload-estimated-start")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/workloads/?mine=1&live=0")
    shoot(page, out_dir, "32-my-queue-narrow")
    page.set_viewport_size({"width": 1280, "height": 800})
    sign_out(page)

    sign_in(page, live_server, "program_manager", p.password)
    page.get_by_role("link", name="Simulator").click()
    expect(page.get_by_role("heading", name="Simulator")).to_be_visible()
    shoot(page, out_dir, "33-simulator-form")
    # On a phone the trace file's help (a CSV header in code) wraps instead of widening it.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    shoot(page, out_dir, "33-simulator-form-narrow")
    page.set_viewport_size({"width": 1280, "height": 800})

    job = simulation_job_create(
        user=p.program_manager, organization=p.organization, trace_source="philly",
        gpus=128, gpus_per_node=8, policies=["fairshare", "quota"], start_day=20, days=2,
    )  # fmt: skip
    simulation_job_run(job_id=job.pk)
    page.goto(f"{base}/simulator/{job.pk}/")
    expect(page.locator("[data-figure][data-drawn=true]")).to_have_count(4, timeout=30_000)
    shoot(page, out_dir, "34-simulation-done")
