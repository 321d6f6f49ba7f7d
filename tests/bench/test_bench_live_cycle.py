"""Benchmark: one live scheduling cycle on PostgreSQL at production scale.

5,000 pending and 2,000 running workloads on 256 nodes of 8 GPUs, 24 projects (20 with a
share). Each round is a full cycle from the same state — read nodes, runs, workloads, the
budget tree and windowed usage from PostgreSQL, run the engine, write runs, start/stop
orders and every pending workload's reason and queue position — and the state is put back
between rounds (not timed). Target: median <= 1 s. Nothing here asserts on time.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from governance.models import Allocation, Cluster, Organization, Program, Project
from scheduler.choices import RunLane, WorkloadState
from scheduler.models import Node, Order, Run, RunNode, SchedulingCycle, Workload
from scheduler.services.cycle import scheduling_cycle_run
from tests.factories import UserFactory

NODES, GPUS_PER_NODE = 256, 8
RUNNING, PENDING = 2000, 5000
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _build() -> Cluster:
    rng = random.Random(7)
    user = UserFactory()
    org = Organization.objects.create(name="Bench", slug="bench")
    cluster = Cluster.objects.create(
        organization=org, name="h100", slug="h100", gpu_type="h100", nodes=NODES,
        gpus_per_node=GPUS_PER_NODE,
    )  # fmt: skip
    since = NOW - timedelta(days=30)
    projects = []
    for p in range(4):
        program = Program.objects.create(organization=org, name=f"P{p}", slug=f"p{p}")
        Allocation.objects.create(
            cluster=cluster, program=program, percent=Decimal(25), valid_from=since,
            set_by=user, reason="bench",
        )  # fmt: skip
        for j in range(6):
            project = Project.objects.create(program=program, name=f"P{p}-{j}", slug=f"p{p}-{j}")
            projects.append(project)
            if j < 5:
                Allocation.objects.create(
                    cluster=cluster, project=project, percent=Decimal(20), valid_from=since,
                    set_by=user, reason="bench",
                )  # fmt: skip
    nodes = Node.objects.bulk_create(
        Node(cluster=cluster, name=f"n{i:03d}", gpus=GPUS_PER_NODE) for i in range(NODES)
    )
    # Running: 2,000 workloads of 1 GPU, packed 7-8 per node (2,000 of 2,048 GPUs busy).
    running = Workload.objects.bulk_create(
        Workload(
            project=rng.choice(projects), cluster=cluster, name=f"r{i}", gpus=1,
            min_runtime_seconds=rng.choice([0, 600, 3600, 28800]), priority=rng.randint(0, 3),
            launch_spec={"command": ["train"]}, state=WorkloadState.RUNNING,
            submitted_at=NOW - timedelta(hours=3, seconds=i),
            first_started_at=NOW - timedelta(hours=2),
        )
        for i in range(RUNNING)
    )  # fmt: skip
    runs = Run.objects.bulk_create(
        Run(
            workload=w, attempt=1, project_id=w.project_id, cluster=cluster, gpus=1,
            lane=RunLane.FREE if w.min_runtime_seconds == 0 else RunLane.CHARGED,
            placement={nodes[i % NODES].name: 1},
            started_at=NOW - timedelta(minutes=rng.randint(1, 240)),
            accounted_until=NOW - timedelta(minutes=1),
        )
        for i, w in enumerate(running)
    )  # fmt: skip
    RunNode.objects.bulk_create(
        RunNode(run=r, node=nodes[i % NODES], gpus=1) for i, r in enumerate(runs)
    )
    Workload.objects.bulk_create(
        Workload(
            project=rng.choice(projects), cluster=cluster, name=f"q{i}",
            gpus=(g := rng.choice([1, 1, 2, 4, 8, 16])), nodes=2 if g == 16 else 1,
            min_runtime_seconds=rng.choice([0, 300, 3600, 14400]), priority=rng.randint(0, 3),
            launch_spec={"command": ["train"]}, submitted_at=NOW - timedelta(seconds=i),
        )
        for i in range(PENDING)
    )  # fmt: skip
    return cluster


@pytest.mark.django_db
def test_bench_live_cycle_5000_pending_2000_running_256_nodes(benchmark):
    cluster = _build()
    baseline_run = Run.objects.order_by("-id").values_list("id", flat=True).first()
    pending_ids = list(
        Workload.objects.filter(state=WorkloadState.PENDING).values_list("id", flat=True)
    )
    running_ids = list(
        Workload.objects.filter(state=WorkloadState.RUNNING).values_list("id", flat=True)
    )

    def reset() -> None:
        """Put the cluster back as it was before the round (not timed)."""
        Order.objects.all().delete()
        RunNode.objects.filter(run_id__gt=baseline_run).delete()
        Run.objects.filter(id__gt=baseline_run).delete()
        Run.objects.update(stop_requested_at=None, stop_reason="", preempted_by=None)
        Workload.objects.filter(id__in=pending_ids).update(
            state=WorkloadState.PENDING, engine_reason="", queue_position=None,
            first_started_at=None,
        )  # fmt: skip
        Workload.objects.filter(id__in=running_ids).update(state=WorkloadState.RUNNING)
        SchedulingCycle.objects.all().delete()

    def cycle():
        return scheduling_cycle_run(cluster_id=cluster.id, now=NOW)

    benchmark.extra_info["target_seconds"] = 1.0
    record = benchmark.pedantic(cycle, setup=reset, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(
        pending=record.pending, running=record.running, starts=record.starts,
        preemptions=record.preemptions, orders=record.orders,
    )  # fmt: skip
    assert record.pending == PENDING and record.running == RUNNING
    assert (
        Workload.objects.filter(state=WorkloadState.PENDING, queue_position__isnull=False).count()
        > 0
    )
