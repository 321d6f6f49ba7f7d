"""Benchmark: "My queue" (``/workloads/``) with 10,000 workloads visible to a researcher.

Made once per session, into the test database: one organization, one 64-node x 8-GPU cluster,
a researcher of one project whose 10,000 workloads are 2,500 pending (with the queue position
and reason a scheduling cycle writes) and 7,500 finished, submitted over 30 days. Rows are
inserted with ``bulk_create``, then ``VACUUM ANALYZE``.

Each round is one full page render through the Django test client (routing, session,
visibility, the filter form, counts per state, the paginator's count, the page's 50
workloads with their estimated starts, template), signed in as the researcher. The cluster's
estimated starts are cached between cycles (``scheduler.selectors.estimates``); the warm-up
round computes them, as the first visitor after a cycle does. Target: median <= 300 ms per
page. Nothing here asserts on time.

Run: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/gov_queuebench
make bench BENCH=tests/bench/test_bench_queue.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client

from scheduler.choices import WorkloadState
from scheduler.models import Node, Workload
from tests.factories import (
    ClusterFactory,
    OrganizationFactory,
    ProgramFactory,
    ProjectFactory,
    UserFactory,
    researcher_of,
)

TARGET_SECONDS = 0.3
PENDING, FINISHED = 2_500, 7_500
START = datetime(2026, 10, 1, tzinfo=UTC)


@pytest.fixture(scope="session")
def queue_world(django_db_setup, django_db_blocker):
    """10,000 workloads of one project, made once per session."""
    with django_db_blocker.unblock():
        org = OrganizationFactory(name="Queue bench", slug="queue-bench")
        cluster = ClusterFactory(organization=org, name="qb", slug="qb", nodes=64, gpus_per_node=8)
        Node.objects.bulk_create(
            Node(cluster=cluster, name=f"qb-{i:03d}", gpus=8) for i in range(64)
        )
        project = ProjectFactory(program=ProgramFactory(organization=org, slug="qb-program"))
        user = UserFactory(username="queue-bench-researcher")
        researcher_of(project, user)
        rows = []
        for i in range(PENDING + FINISHED):
            pending = i % 4 == 0
            submitted = START + timedelta(minutes=4 * i)
            rows.append(
                Workload(
                    project=project,
                    cluster=cluster,
                    submitted_by=user,
                    name=f"run-{i:05d}",
                    gpus=1 + i % 8,
                    min_runtime_seconds=1800,
                    declared_duration_seconds=3600,
                    launch_spec={"command": ["train"]},
                    submitted_at=submitted,
                    state=WorkloadState.PENDING if pending else WorkloadState.SUCCEEDED,
                    finished_at=None if pending else submitted + timedelta(hours=1),
                    queue_key=i if pending else None,
                    engine_reason="project under budget; waiting for 8 GPUs on one node"
                    if pending
                    else "",
                )
            )
        Workload.objects.bulk_create(rows, batch_size=2_000)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE scheduler_workload")
    return {"user": user, "project": project}


@pytest.fixture
def researcher(queue_world, db) -> Client:
    client = Client()
    client.force_login(queue_world["user"])
    return client


def _bench(benchmark, client, params: dict):
    benchmark.extra_info["target_seconds"] = TARGET_SECONDS
    benchmark.extra_info["visible_workloads"] = PENDING + FINISHED
    response = benchmark.pedantic(
        client.get, args=("/workloads/", params), rounds=15, iterations=1, warmup_rounds=1
    )
    assert response.status_code == 200
    page = response.context["page"]
    assert len(page.object_list) == 50
    benchmark.extra_info["matching"] = page.paginator.count
    benchmark.extra_info["with_estimate"] = sum(
        w.has_estimate for w in response.context["workloads"]
    )
    benchmark.extra_info["page_kb"] = round(len(response.content) / 1024, 1)
    return page


@pytest.mark.django_db
def test_bench_queue_first_page(benchmark, researcher):
    page = _bench(benchmark, researcher, {})
    assert page.paginator.count == PENDING + FINISHED
    assert {w.state for w in page.object_list} == {WorkloadState.PENDING}


@pytest.mark.django_db
def test_bench_queue_pending_by_position(benchmark, researcher):
    page = _bench(benchmark, researcher, {"state": "pending", "sort": "position"})
    assert [w.queue_position for w in page.object_list] == list(range(1, 51))


@pytest.mark.django_db
def test_bench_queue_deep_page(benchmark, researcher):
    page = _bench(benchmark, researcher, {"page": 150})
    assert page.number == 150
