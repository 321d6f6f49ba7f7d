"""Journey: the PI asks for more of Vision for Detection; the program manager previews the
effect on the last weeks of real demand, then approves. Screenshots of the what-if page.

Since yesterday morning Detection, Segmentation and Translation each sent eight 3-hour 8-GPU
jobs to the personas' 32-GPU cluster; the preview replays them under today's shares and the requested ones, in a
real Celery worker (``celery_worker``), and the page follows it to the figures.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from governance.models import ApprovalRequest
from governance.selectors.tree import share_at
from scheduler.choices import WorkloadState
from scheduler.models import SimulationJobState, WhatIfRun
from tests.browser.conftest import sign_in, sign_out
from tests.browser.test_screenshots_dashboards import out_dir, shoot  # noqa: F401
from tests.scheduler.test_ledger_trace import workload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def yesterday(world) -> None:
    """Since yesterday morning each of three teams sent an 8-GPU job for 3 hours every hour
    for eight hours, and a 1-GPU check two hours ago: more than the cluster's 32 GPUs while
    they arrived, so the shares decided who waited."""
    now = timezone.now()

    class Shape:  # what the history helper needs
        cluster, user, projects = world.cluster, world.pi, {}

    for project in (world.project_a1, world.project_a2, world.project_b1):
        Shape.projects["budgeted"] = project
        for i in range(8):
            at = now - timedelta(hours=30 - i)
            workload(Shape, f"{project.slug}-{i}", WorkloadState.SUCCEEDED, at,
                     runs=[(at, at + timedelta(hours=3))], gpus=8)  # fmt: skip
        at = now - timedelta(hours=2)
        workload(Shape, f"{project.slug}-check", WorkloadState.SUCCEEDED, at,
                 runs=[(at, at + timedelta(minutes=10))], gpus=1)  # fmt: skip


def test_the_manager_previews_a_request_then_approves_it(
    page,
    live_server,
    world,
    celery_worker,
    out_dir,  # noqa: F811
):
    yesterday(world)
    sign_in(page, live_server, "pi", world.password)
    page.goto(f"{live_server.url}/clusters/{world.cluster.pk}/split/program/{world.program_a.pk}/")
    page.get_by_label("New share of Detection in percent").fill("65")
    page.get_by_label("Reason").fill("Paper deadline in May.")
    page.get_by_role("button", name="Send the request").click()
    expect(page.get_by_test_id("state")).to_have_text("Submitted")
    request = ApprovalRequest.objects.get()
    sign_out(page)

    sign_in(page, live_server, "program_manager", world.password)
    page.goto(f"{live_server.url}/requests/{request.pk}/")
    page.get_by_test_id("preview").get_by_role("button", name="Preview effect").click()
    page.wait_for_url(re.compile(r".*/what-if/\d+/$"))
    expect(page.get_by_test_id("proposal")).to_contain_text("65.00 %")
    # The worker replays; the page follows it to the figures.
    expect(page.get_by_test_id("summary")).to_be_visible(timeout=60_000)
    run = WhatIfRun.objects.get()
    assert run.state == SimulationJobState.DONE, run.error
    effect = page.get_by_test_id("effect")
    expect(effect).to_contain_text("Detection")
    expect(effect).to_contain_text("Segmentation")
    expect(effect).to_contain_text("Other teams (1)")  # Language's team, not the manager's
    expect(page.get_by_test_id("limits")).to_contain_text("Past demand is not future demand")
    shoot(page, out_dir, "90-whatif-request-preview-1280")
    page.set_viewport_size({"width": 390, "height": 800})
    shoot(page, out_dir, "90-whatif-request-preview-390")
    page.set_viewport_size({"width": 1280, "height": 800})

    page.get_by_role("link", name="Approve or reject the request").click()
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("state")).to_have_text("Applied")
    assert share_at(node=world.project_a1, cluster=world.cluster) == Decimal("65.00")
