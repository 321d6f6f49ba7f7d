"""The nodes page (operator actions) and the workloads pages, per persona."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from scheduler.choices import NodeState, NodeStateSource, OrderKind, RunLane, WorkloadState
from scheduler.models import Node, Order, Run, RunNode, Workload
from scheduler.services.workloads import workload_submit
from tests.personas import build_personas

pytestmark = pytest.mark.django_db


@pytest.fixture
def personas(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_personas()


@pytest.fixture
def nodes(personas):
    return [
        Node.objects.create(cluster=personas.cluster, name=f"gpu-{i}", gpus=8, last_heartbeat=timezone.now())
        for i in range(1, 3)
    ]  # fmt: skip


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def running(workload: Workload, node: Node, *, started_minutes_ago: float) -> Run:
    started = timezone.now() - timedelta(minutes=started_minutes_ago)
    run = Run.objects.create(
        workload=workload, attempt=1, project=workload.project, cluster=workload.cluster,
        gpus=workload.gpus, lane=RunLane.CHARGED, placement={node.name: workload.gpus},
        started_at=started, accounted_until=started,
    )  # fmt: skip
    RunNode.objects.create(run=run, node=node, gpus=workload.gpus)
    Order.objects.create(
        kind=OrderKind.START, cluster=workload.cluster, node=node, run=run,
        idempotency_key=f"start:{run.pk}:{node.pk}", payload={}, created_at=started,
    )  # fmt: skip
    Workload.objects.filter(pk=workload.pk).update(state=WorkloadState.RUNNING)
    return run


def submit(personas, name="train", user=None, project=None, gpus=4, min_runtime=3600):
    return workload_submit(
        project=project or personas.project_a1, cluster=personas.cluster, name=name, gpus=gpus,
        min_runtime_seconds=min_runtime, launch_spec={"command": ["true"]}, submitted_by=user,
    )  # fmt: skip


# --- nodes page -----------------------------------------------------------------------------


def test_org_admin_sees_nodes_gpus_in_use_and_actions(personas, nodes):
    running(submit(personas), nodes[0], started_minutes_ago=5)
    response = browser(personas.org_admin).get("/nodes/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "gpu-1" in html and "gpu-2" in html
    assert "gpu-1: healthy, 4 of 8 GPUs in use · Detection 4" in html
    the_map = html.split('data-testid="gpu-map"', 1)[1].split("</div>", 1)[0]
    assert the_map.count('<i class="g p') == 4  # one coloured square per GPU held
    assert the_map.count('<i class="g">') == 12  # and a grey one per free GPU
    assert "<strong>4</strong> of 16 healthy GPUs in use" in html
    node_page = browser(personas.org_admin).get(f"/nodes/{nodes[0].pk}/").content.decode()
    assert f'href="/nodes/{nodes[0].pk}/drain/">Drain…</a>' in node_page
    assert f'href="/nodes/{nodes[0].pk}/mark-down/">Mark down…</a>' in node_page
    assert '<meta http-equiv="refresh"' in html
    assert (
        '<meta http-equiv="refresh"'
        not in browser(personas.org_admin).get("/nodes/?live=0").content.decode()
    )


@pytest.mark.parametrize("persona", ["researcher", "pi", "program_manager", "finance"])
def test_others_see_the_nodes_without_operator_actions(personas, nodes, persona):
    html = browser(personas.users[persona]).get("/nodes/").content.decode()
    assert "gpu-1" in html
    node_page = browser(personas.users[persona]).get(f"/nodes/{nodes[0].pk}/")
    assert node_page.status_code == 200
    assert 'data-testid="node-actions"' not in node_page.content.decode()
    assert browser(personas.users[persona]).get(f"/nodes/{nodes[0].pk}/drain/").status_code == 403


def test_an_outsider_sees_no_cluster(personas, nodes):
    html = browser(personas.outsider).get("/nodes/").content.decode()
    assert "gpu-1" not in html
    assert 'data-testid="no-clusters"' in html


def test_anonymous_visitors_are_sent_to_sign_in(nodes):
    response = Client().get("/nodes/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_org_admin_drains_and_undrains_a_node(personas, nodes):
    client = browser(personas.org_admin)
    response = client.post(f"/nodes/{nodes[0].pk}/drain/", {"reason": "fan failure"}, follow=True)
    assert response.status_code == 200
    nodes[0].refresh_from_db()
    assert nodes[0].state == NodeState.DRAINING
    assert nodes[0].state_reason == "fan failure"
    assert nodes[0].state_changed_by == personas.org_admin
    assert "gpu-1 is draining" in response.content.decode()
    client.post(f"/nodes/{nodes[0].pk}/undrain/")
    nodes[0].refresh_from_db()
    assert nodes[0].state == NodeState.HEALTHY


def test_mark_down_requeues_and_bring_up_returns_the_node(personas, nodes):
    workload = submit(personas)
    run = running(workload, nodes[0], started_minutes_ago=5)
    client = browser(personas.org_admin)
    client.post(f"/nodes/{nodes[0].pk}/mark-down/", {"reason": "PSU"})
    nodes[0].refresh_from_db()
    run.refresh_from_db()
    workload.refresh_from_db()
    assert nodes[0].state == NodeState.DOWN
    assert run.end_reason == "node_down"
    assert workload.state == WorkloadState.PENDING
    client.post(f"/nodes/{nodes[0].pk}/bring-up/")
    nodes[0].refresh_from_db()
    assert nodes[0].state == NodeState.HEALTHY


def test_draining_a_down_node_is_refused_with_a_message(personas, nodes):
    Node.objects.filter(pk=nodes[0].pk).update(
        state=NodeState.DOWN, state_source=NodeStateSource.SYSTEM
    )
    response = browser(personas.org_admin).post(f"/nodes/{nodes[0].pk}/drain/", follow=True)
    assert "cannot be drained" in response.content.decode()
    nodes[0].refresh_from_db()
    assert nodes[0].state == NodeState.DOWN


@pytest.mark.parametrize("persona", ["researcher", "pi", "program_manager", "finance"])
def test_only_org_admins_operate_nodes(personas, nodes, persona):
    response = browser(personas.users[persona]).post(f"/nodes/{nodes[0].pk}/drain/")
    assert response.status_code == 403
    nodes[0].refresh_from_db()
    assert nodes[0].state == NodeState.HEALTHY


def test_outsiders_do_not_find_the_node(personas, nodes):
    assert browser(personas.outsider).post(f"/nodes/{nodes[0].pk}/drain/").status_code == 404


def test_unknown_actions_are_refused_and_a_get_only_asks_to_confirm(personas, nodes):
    client = browser(personas.org_admin)
    assert client.post(f"/nodes/{nodes[0].pk}/explode/").status_code == 404
    ask = client.get(f"/nodes/{nodes[0].pk}/drain/")
    assert ask.status_code == 200
    assert "evicted once past its minimum runtime" in ask.content.decode()
    nodes[0].refresh_from_db()
    assert nodes[0].state == NodeState.HEALTHY
    assert client.put(f"/nodes/{nodes[0].pk}/drain/").status_code == 405


def test_the_map_filters_by_state_and_name_and_refuses_a_bad_filter(personas, nodes):
    client = browser(personas.org_admin)
    client.post(f"/nodes/{nodes[1].pk}/drain/", {"reason": "repair"})
    draining = client.get("/nodes/", {"state": "draining"}).content.decode()
    assert 'data-testid="node-gpu-2"' in draining and 'data-testid="node-gpu-1"' not in draining
    named = client.get("/nodes/", {"q": "PU-1"}).content.decode()
    assert 'data-testid="node-gpu-1"' in named and 'data-testid="node-gpu-2"' not in named
    for params, field in [({"state": "exploded"}, "state"), ({"q": "x" * 101}, "q")]:
        response = client.get("/nodes/", params)
        assert response.status_code == 400
        assert f"The parameter <code>{field}</code> is not valid" in response.content.decode()


def test_a_workload_of_a_project_the_viewer_does_not_see_is_shown_by_its_project_only(
    personas, nodes
):
    running(
        submit(personas, "secret-b1", project=personas.project_b1), nodes[0], started_minutes_ago=5
    )
    html = browser(personas.researcher).get(f"/nodes/{nodes[0].pk}/").content.decode()
    assert "secret-b1" not in html and "Translation" not in html
    assert "another project&#x27;s workload" in html
    the_map = browser(personas.researcher).get("/nodes/").content.decode()
    assert "secret-b1" not in the_map and "Translation" not in the_map
    assert "other projects 4" in the_map  # the node's hover text: GPUs only
    assert "secret-b1" in browser(personas.org_admin).get(f"/nodes/{nodes[0].pk}/").content.decode()


def test_a_drain_in_progress_shows_each_workload_and_when_it_may_leave(personas, nodes):
    long_run = running(submit(personas, "long"), nodes[0], started_minutes_ago=10)
    running(submit(personas, "done", min_runtime=60), nodes[0], started_minutes_ago=10)
    browser(personas.org_admin).post(f"/nodes/{nodes[0].pk}/drain/", {"reason": "repair"})
    html = browser(personas.researcher).get("/nodes/").content.decode()
    assert 'data-testid="drain-progress"' in html
    protected = (long_run.started_at + timedelta(hours=1)).astimezone(
        timezone.get_current_timezone()
    )
    assert f"protected until {protected:%H:%M:%S}" in html
    assert "evicted at the next cycle" in html


# --- workloads pages ------------------------------------------------------------------------


def test_workloads_page_shows_position_and_reason(personas):
    ahead = [submit(personas, f"ahead-{i}", user=personas.researcher) for i in range(2)]
    workload = submit(personas, user=personas.researcher)
    for key, queued in enumerate([*ahead, workload], start=1):
        Workload.objects.filter(pk=queued.pk).update(queue_key=key * 10)
    Workload.objects.filter(pk=workload.pk).update(
        engine_reason="Waiting for 4 GPUs; project over budget."
    )
    submit(personas, "secret-b1", project=personas.project_b1)
    html = browser(personas.researcher).get("/workloads/").content.decode()
    assert "train" in html and "secret-b1" not in html
    assert "Waiting for 4 GPUs; project over budget." in html
    detail = browser(personas.researcher).get(f"/workloads/{workload.pk}/").content.decode()
    assert "Position <strong>3</strong>" in detail
    assert "Cancel this workload" in detail


def test_workload_detail_of_another_project_is_404(personas):
    other = submit(personas, "secret-b1", project=personas.project_b1)
    assert browser(personas.researcher).get(f"/workloads/{other.pk}/").status_code == 404
    assert browser(personas.researcher).post(f"/workloads/{other.pk}/cancel/").status_code == 404


def test_cancel_from_the_page(personas):
    workload = submit(personas, user=personas.researcher)
    response = browser(personas.researcher).post(f"/workloads/{workload.pk}/cancel/", follow=True)
    assert response.status_code == 200
    workload.refresh_from_db()
    assert workload.state == WorkloadState.CANCELLED
    teammate = submit(personas, "pis", user=personas.pi)
    assert browser(personas.researcher).post(f"/workloads/{teammate.pk}/cancel/").status_code == 403


def test_run_history_names_the_preemptor(personas, nodes):
    victim = submit(personas, "victim", user=personas.researcher)
    winner = submit(personas, "winner")
    run = running(victim, nodes[0], started_minutes_ago=5)
    Run.objects.filter(pk=run.pk).update(
        ended_at=timezone.now(), end_reason="preempted", preempted_by=winner
    )
    html = browser(personas.researcher).get(f"/workloads/{victim.pk}/").content.decode()
    assert "Preempted" in html and "winner" in html
