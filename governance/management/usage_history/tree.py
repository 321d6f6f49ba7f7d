"""The budget tree of a generated usage history: organization, programs, projects, clusters,
shares, cost rates, users, and one charged and one free-lane run per project and cluster.

``usage_history_tree`` builds it and fills the ``usage_history_projects`` temporary table
that the bulk SQL (``governance.management.usage_history.sql``) reads.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import connection

from governance.choices import Role
from governance.management.usage_history.sql import PROJECTS_ROW_SQL, PROJECTS_TABLE_SQL
from governance.models import (
    Allocation,
    Cluster,
    CostRate,
    Organization,
    Program,
    Project,
    RoleAssignment,
)
from scheduler.choices import RunEndReason, RunLane, WorkloadState
from scheduler.models import Run, Workload

PROJECTS_PER_PROGRAM = 20
GPU_TYPES = ("h100", "b200", "a100", "l40s")
DEFAULT_RATES = {
    "h100": Decimal("2.4000"),
    "b200": Decimal("4.1000"),
    "a100": Decimal("1.3000"),
    "l40s": Decimal("0.9000"),
}
HUNDRED = Decimal("100")


@dataclass(frozen=True)
class HistoryWindow:
    """Who and what a generated history is: its organization's slug, the seed of its noise,
    how many projects and clusters, and the hours ``[start, end)`` it covers."""

    slug: str
    seed: int
    projects: int
    clusters: int
    start: datetime
    end: datetime


@dataclass(frozen=True)
class ProjectFigures:
    """One project's figures on one cluster, as the bulk SQL reads them."""

    project: Project
    cluster: Cluster
    effective: Decimal  # the project's effective share of the cluster, in percent
    entitled: Decimal  # entitled GPU-seconds per hour
    appetite: float  # how hungry the project is, around 1
    nominal: float  # nominal GPUs its demand is drawn around


@dataclass(frozen=True)
class Nodes:
    """The nodes of the generated tree, and the org admin who set its shares."""

    admin: object
    programs: list[Program]
    projects: list[Project]
    clusters: list[Cluster]


def split_percents(rng: random.Random, n: int, total: Decimal) -> list[Decimal]:
    """``n`` random percents (two decimals) summing to at most ``total``."""
    weights = [rng.uniform(0.5, 2.0) for _ in range(n)]
    scale = float(total) / sum(weights)
    return [Decimal(str(round(w * scale - 0.005, 2))).max(Decimal("0.01")) for w in weights]


def usage_history_tree(window: HistoryWindow) -> None:
    """Build the tree of ``window`` and fill the ``usage_history_projects`` temporary table
    (dropped at the end of the caller's transaction)."""
    rng = random.Random(window.seed)
    nodes = _nodes(window)
    _cost_rates(nodes.clusters, window.start)
    figures = _shares(rng, nodes, window.start)
    runs = _runs(figures, window)
    _projects_table(figures, runs)


def _nodes(window: HistoryWindow) -> Nodes:
    """The organization with its users, programs, projects and clusters."""
    User = get_user_model()
    slug = window.slug
    org = Organization.objects.create(name=f"Usage history {window.seed}", slug=slug)
    admin = User.objects.create_user(username=f"{slug}-admin", password=None)
    finance = User.objects.create_user(
        username=f"{slug}-finance", email=f"finance@{slug}.example", password=None
    )
    RoleAssignment.objects.create(user=admin, role=Role.ORG_ADMIN, organization=org)
    RoleAssignment.objects.create(user=finance, role=Role.FINANCE, organization=org)
    n_programs = -(-window.projects // PROJECTS_PER_PROGRAM)
    programs = Program.objects.bulk_create(
        Program(organization=org, name=f"Program {i + 1:03d}", slug=f"program-{i + 1:03d}")
        for i in range(n_programs)
    )
    projects = Project.objects.bulk_create(
        Project(
            program=programs[i // PROJECTS_PER_PROGRAM],
            name=f"Project {i + 1:04d}",
            slug=f"project-{i + 1:04d}",
            cost_centre=f"CC-{1000 + i // 5}",
        )
        for i in range(window.projects)
    )
    clusters = Cluster.objects.bulk_create(
        Cluster(
            organization=org,
            name=f"{GPU_TYPES[i].upper()} cluster",
            slug=GPU_TYPES[i],
            gpu_type=GPU_TYPES[i],
            nodes=32,
            gpus_per_node=8,
        )
        for i in range(window.clusters)
    )
    return Nodes(admin=admin, programs=programs, projects=projects, clusters=clusters)


def _cost_rates(clusters: list[Cluster], start: datetime) -> None:
    """A rate from ``start`` for each GPU type that has none yet."""
    for cluster in clusters:
        if not CostRate.objects.filter(gpu_type=cluster.gpu_type).exists():
            CostRate.objects.create(
                gpu_type=cluster.gpu_type,
                rate_per_gpu_hour=DEFAULT_RATES[cluster.gpu_type],
                valid_from=start,
                note="generate_usage_history",
            )


def _shares(rng: random.Random, nodes: Nodes, start: datetime) -> list[ProjectFigures]:
    """Random shares from ``start`` (about 5 % of projects hold none) and each project's
    figures on each cluster. The random draws keep one order, so a seed gives one history."""
    allocations: list[Allocation] = []
    figures: list[ProjectFigures] = []
    no_share = {p.pk for p in nodes.projects if rng.random() < 0.05}

    def allocation(cluster: Cluster, node: Program | Project, percent: Decimal) -> Allocation:
        """The generated share of ``node`` on ``cluster`` from ``start``, set by the org admin."""
        kind = "program" if isinstance(node, Program) else "project"
        return Allocation(
            cluster=cluster,
            percent=percent,
            valid_from=start,
            set_by=nodes.admin,
            reason="generated",
            **{kind: node},
        )

    for cluster in nodes.clusters:
        program_shares = split_percents(rng, len(nodes.programs), Decimal("95"))
        for program, program_share in zip(nodes.programs, program_shares, strict=True):
            allocations.append(allocation(cluster, program, program_share))
            members = [p for p in nodes.projects if p.program_id == program.pk]
            budgeted = [p for p in members if p.pk not in no_share]
            shares = split_percents(rng, len(budgeted), Decimal("95")) if budgeted else []
            share_of = dict(zip((p.pk for p in budgeted), shares, strict=True))
            for project in members:
                share = share_of.get(project.pk, Decimal(0))
                if share:
                    allocations.append(allocation(cluster, project, share))
                effective = program_share * share / HUNDRED
                entitled_gpus = effective / HUNDRED * cluster.total_gpus
                figures.append(
                    ProjectFigures(
                        project=project,
                        cluster=cluster,
                        effective=effective,
                        entitled=(entitled_gpus * 3600).quantize(Decimal("0.000001")),
                        appetite=rng.uniform(0.3, 1.7),
                        nominal=max(float(entitled_gpus), 2.0),
                    )
                )
    Allocation.objects.bulk_create(allocations, batch_size=2000)
    return figures


def _runs(figures: list[ProjectFigures], window: HistoryWindow) -> list[Run]:
    """One finished charged workload and one free-lane workload per project and cluster, each
    with its run over the whole window: charged and free in turn, in the order of ``figures``."""
    start, end = window.start, window.end
    workloads = Workload.objects.bulk_create(
        (
            Workload(
                project=item.project,
                cluster=item.cluster,
                name=f"history-{lane}",
                gpus=1,
                min_runtime_seconds=min_runtime,
                state=WorkloadState.SUCCEEDED,
                submitted_at=start,
                first_started_at=start,
                finished_at=end,
            )
            for item in figures
            for lane, min_runtime in ((RunLane.CHARGED, 3600), (RunLane.FREE, 0))
        ),
        batch_size=2000,
    )
    return Run.objects.bulk_create(
        (
            Run(
                workload=workload,
                attempt=1,
                project_id=workload.project_id,
                cluster_id=workload.cluster_id,
                gpus=1,
                lane=RunLane.FREE if workload.min_runtime_seconds == 0 else RunLane.CHARGED,
                started_at=start,
                ended_at=end,
                end_reason=RunEndReason.SUCCEEDED,
                accounted_until=end,
            )
            for workload in workloads
        ),
        batch_size=2000,
    )


def _projects_table(figures: list[ProjectFigures], runs: list[Run]) -> None:
    """Fill the temporary table the bulk SQL reads: one row per project and cluster."""
    with connection.cursor() as cursor:
        cursor.execute(PROJECTS_TABLE_SQL)
        cursor.executemany(
            PROJECTS_ROW_SQL,
            [
                (
                    item.project.pk,
                    item.cluster.pk,
                    item.entitled,
                    item.effective.quantize(Decimal("0.00000001")),
                    item.cluster.total_gpus,
                    item.appetite,
                    item.nominal,
                    runs[2 * index].pk,
                    runs[2 * index + 1].pk,
                )
                for index, item in enumerate(figures)
            ],
        )
