"""Fixtures for the live loop's tests: a small cluster with nodes and a budget tree."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from governance.models import Allocation, Cluster, Organization, Program, Project
from scheduler.models import Node, Run, UsageRecord
from tests.factories import UserFactory


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker of the tests that break shared services on purpose."""
    config.addinivalue_line(
        "markers",
        "faults: kills workers or restarts PostgreSQL/Redis (disturbs other sessions; few, quick)",
    )


@dataclass
class World:
    """An organization with one program (100 %) and projects with the given shares."""

    cluster: Cluster
    nodes: list[Node]
    projects: dict[str, Project]
    program: Program
    user: object
    since: datetime
    extra: dict = field(default_factory=dict)


def build_world(
    *,
    nodes: int = 2,
    gpus_per_node: int = 8,
    shares: dict[str, str | None] | None = None,
    since: datetime | None = None,
) -> World:
    """Create the tree, the cluster and its nodes. A share of ``None``: no allocation."""
    shares = {"budgeted": "100", "unbudgeted": None} if shares is None else shares
    since = since or datetime(2026, 1, 1, tzinfo=UTC)
    user = UserFactory()
    org = Organization.objects.create(name="Loop Org", slug="loop-org")
    cluster = Cluster.objects.create(
        organization=org,
        name="h100",
        slug="h100",
        gpu_type="h100",
        nodes=nodes,
        gpus_per_node=gpus_per_node,
    )
    program = Program.objects.create(organization=org, name="Research", slug="research")
    Allocation.objects.create(
        cluster=cluster, program=program, percent=Decimal(100), valid_from=since, set_by=user,
        reason="test",
    )  # fmt: skip
    projects = {}
    for slug, share in shares.items():
        project = Project.objects.create(program=program, name=slug.title(), slug=slug)
        projects[slug] = project
        if share is not None:
            Allocation.objects.create(
                cluster=cluster, project=project, percent=Decimal(share), valid_from=since,
                set_by=user, reason="test",
            )  # fmt: skip
    node_rows = [
        Node.objects.create(cluster=cluster, name=f"node{i + 1}", gpus=gpus_per_node)
        for i in range(nodes)
    ]
    return World(cluster, node_rows, projects, program, user, since)


@pytest.fixture
def world(db) -> World:
    """Two nodes of 8 GPUs; project ``budgeted`` holds 100 %, ``unbudgeted`` nothing."""
    return build_world()


def ledger_total(cluster: Cluster) -> Decimal:
    """Σ GPU-seconds in the usage ledger of a cluster."""
    return UsageRecord.objects.filter(cluster=cluster).aggregate(t=Sum("gpu_seconds"))[
        "t"
    ] or Decimal(0)


def runs_total(cluster: Cluster, *, now: datetime | None = None) -> Decimal:
    """Σ GPUs x run time of the cluster's runs, computed from the runs themselves.

    Open runs count up to ``now`` (omit ``now`` to require that every run has ended).
    """
    total = Decimal(0)
    for run in Run.objects.filter(cluster=cluster):
        end = run.ended_at or now
        assert end is not None, f"run {run.pk} is still open"
        micro = (end - run.started_at) // timedelta(microseconds=1)
        total += Decimal(run.gpus * micro) / Decimal(1_000_000)
    return total
