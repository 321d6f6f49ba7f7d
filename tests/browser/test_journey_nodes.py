"""Journey: an operator finds a node on the GPU map, opens it, drains it after confirming
with a reason, and sees the drain on the map, at 1,280 and 390 px wide."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.choices import NodeState
from scheduler.models import Node
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.workloads import workload_submit
from tests.browser.conftest import sign_in
from tests.browser.test_screenshots import out_dir, shoot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 390])
def test_operator_finds_a_node_on_the_map_and_drains_it_with_a_reason(
    page,
    live_server,
    world,
    out_dir,  # noqa: F811
    width,
):
    p = world
    for i in range(1, 25):
        Node.objects.create(
            cluster=p.cluster, name=f"gpu-{i:02d}", gpus=8, last_heartbeat=timezone.now()
        )
    for i, (project, user) in enumerate(
        [(p.project_a1, p.researcher), (p.project_b1, p.org_admin)] * 6
    ):
        workload_submit(
            project=project, cluster=p.cluster, name=f"train-{i}", gpus=4 + 2 * (i % 3),
            min_runtime_seconds=3600, launch_spec={"command": ["train"]}, submitted_by=user,
        )  # fmt: skip
    scheduling_cycle_run(cluster_id=p.cluster.id)
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_server, "org_admin", p.password)
    page.goto(f"{live_server.url}/nodes/?live=0")
    expect(page.get_by_test_id("gpu-map").locator(".gpu-node")).to_have_count(24)
    shoot(page, out_dir, f"37-nodes-map-{width}")

    page.get_by_label("Name contains").fill("gpu-01")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_test_id("gpu-map").locator(".gpu-node")).to_have_count(1)
    page.get_by_test_id("node-gpu-01").click()
    expect(page.get_by_test_id("node-state")).to_have_text("Healthy")
    page.get_by_role("link", name="Drain…").click()
    expect(page.get_by_test_id("action-effect")).to_contain_text("evicted once past its minimum")
    page.get_by_label("Reason").fill("Fan replacement booked.")
    shoot(page, out_dir, f"38-node-drain-confirm-{width}")
    page.get_by_role("button", name="Drain gpu-01").click()
    expect(page.get_by_test_id("node-state")).to_have_text("Draining")
    node = Node.objects.get(name="gpu-01")
    assert (node.state, node.state_reason) == (NodeState.DRAINING, "Fan replacement booked.")

    page.goto(f"{live_server.url}/nodes/?state=draining&live=0")
    expect(page.get_by_test_id("gpu-map").locator(".gpu-node.s-draining")).to_have_count(1)
    expect(page.get_by_test_id("drain-progress")).to_contain_text("gpu-01")
