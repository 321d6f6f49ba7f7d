"""Benchmark: the nodes page (``/nodes/``) at 1,000 nodes x 8 GPUs with 8,000 running
workloads, and one node's page.

Made once per session, into the test database: one organization with 20 projects, one
cluster of 1,000 nodes of 8 GPUs, 8,000 one-GPU workloads running (one open run each, on
8 per node), bulk-inserted, then ``VACUUM ANALYZE``. Each round is one full page render
through the Django test client as the org admin: routing, session, visibility, the two
queries of the map (nodes, open runs with their workloads and projects), the 8,000 GPU
squares and the template. Target: median <= 300 ms. Nothing here asserts on time.

Run: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/gov_nodesbench
make bench BENCH=tests/bench/test_bench_nodes.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client

from scheduler.choices import RunLane, WorkloadState
from scheduler.models import Node, Run, RunNode, Workload
from tests.factories import (
    ClusterFactory,
    OrganizationFactory,
    ProgramFactory,
    ProjectFactory,
    UserFactory,
    org_admin_of,
)

TARGET_SECONDS = 0.3
NODES, GPUS, PROJECTS = 1_000, 8, 20
STARTED = datetime(2026, 11, 30, 12, tzinfo=UTC)


@pytest.fixture(scope="session")
def fleet(django_db_setup, django_db_blocker):
    """1,000 nodes, each with 8 one-GPU workloads running; made once per session."""
    with django_db_blocker.unblock():
        org = OrganizationFactory(name="Nodes bench", slug="nodes-bench")
        cluster = ClusterFactory(
            organization=org, name="nb", slug="nb", nodes=NODES, gpus_per_node=GPUS
        )
        program = ProgramFactory(organization=org, slug="nb-program")
        projects = [ProjectFactory(program=program, slug=f"nb-{i:02d}") for i in range(PROJECTS)]
        admin = UserFactory(username="nodes-bench-admin")
        org_admin_of(org, admin)
        nodes = Node.objects.bulk_create(
            Node(cluster=cluster, name=f"nb-{i:04d}", gpus=GPUS) for i in range(NODES)
        )
        workloads = Workload.objects.bulk_create(
            (
                Workload(
                    project=projects[(i // GPUS) % PROJECTS],
                    cluster=cluster,
                    name=f"train-{i:05d}",
                    gpus=1,
                    min_runtime_seconds=7200,
                    launch_spec={"command": ["train"]},
                    submitted_at=STARTED,
                    state=WorkloadState.RUNNING,
                    first_started_at=STARTED,
                )
                for i in range(NODES * GPUS)
            ),
            batch_size=2_000,
        )
        runs = Run.objects.bulk_create(
            (
                Run(
                    workload=w,
                    attempt=1,
                    project_id=w.project_id,
                    cluster=cluster,
                    gpus=1,
                    lane=RunLane.CHARGED,
                    placement={nodes[i // GPUS].name: 1},
                    started_at=STARTED + timedelta(seconds=i),
                    accounted_until=STARTED,
                )
                for i, w in enumerate(workloads)
            ),
            batch_size=2_000,
        )
        RunNode.objects.bulk_create(
            (RunNode(run=r, node=nodes[i // GPUS], gpus=1) for i, r in enumerate(runs)),
            batch_size=2_000,
        )
        with connection.cursor() as cursor:
            for table in ("scheduler_node", "scheduler_run", "scheduler_runnode"):
                cursor.execute(f"VACUUM ANALYZE {table}")
    return {"admin": admin, "node": nodes[NODES // 2]}


@pytest.fixture
def admin(fleet, db) -> Client:
    client = Client()
    client.force_login(fleet["admin"])
    return client


def _bench(benchmark, client, url: str, params: dict | None = None):
    benchmark.extra_info["target_seconds"] = TARGET_SECONDS
    benchmark.extra_info["nodes"] = NODES
    benchmark.extra_info["running"] = NODES * GPUS
    response = benchmark.pedantic(
        client.get, args=(url, params or {}), rounds=15, iterations=1, warmup_rounds=1
    )
    assert response.status_code == 200
    benchmark.extra_info["page_kb"] = round(len(response.content) / 1024, 1)
    return response.content.decode()


@pytest.mark.django_db
def test_bench_nodes_map_1000_nodes(benchmark, admin):
    html = _bench(benchmark, admin, "/nodes/")
    assert html.count('class="gpu-node ') == NODES
    assert "8,000</strong> of 8,000 healthy GPUs in use" in html


@pytest.mark.django_db
def test_bench_nodes_map_searched(benchmark, admin):
    html = _bench(benchmark, admin, "/nodes/", {"q": "nb-05"})
    assert html.count('class="gpu-node ') == 100


@pytest.mark.django_db
def test_bench_node_page(benchmark, admin, fleet):
    html = _bench(benchmark, admin, f"/nodes/{fleet['node'].pk}/")
    assert html.count('data-testid="node-work"') == GPUS
