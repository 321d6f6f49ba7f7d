"""Screenshots of the dashboards on the demo data with ten days of usage, in headless Chromium.

``UPDATE_SCREENSHOTS=1`` writes ``docs/screenshots/20-…png`` onward; otherwise the PNGs go to
a temporary directory, so the suite still checks every dashboard renders, draws its charts
and fits a 390 px screen. The usage is made here, hour by hour, the way accounting writes
it: entitled = effective share x healthy GPUs, charged = what ran (budgeted up to the
entitlement, the rest burst), some free-lane work, a node down two days ago, a finished drain
yesterday and a drain in progress.
"""

from __future__ import annotations

import math
import os
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import NamedTuple

import pytest
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from governance.models import Allocation, Cluster, Program, Project
from governance.selectors.tree import ShareRow, pick_shares
from scheduler.choices import NodeState, RunEndReason, RunLane, WorkloadState
from scheduler.models import (
    AccountingCursor,
    Node,
    Run,
    RunNode,
    SchedulingCycle,
    UsageHour,
    Workload,
)
from tests.browser.conftest import sign_in, sign_out
from tests.browser.test_screenshots import shoot as shoot_and_check

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
DAYS = 10


@pytest.fixture
def out_dir(tmp_path) -> Path:
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        path = ROOT / "docs" / "screenshots"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path


def _run(project, cluster, node, *, gpus, started, min_runtime, **fields) -> Run:
    workload = Workload.objects.create(
        project=project,
        cluster=cluster,
        name="pretrain",
        gpus=gpus,
        min_runtime_seconds=min_runtime,
        state=WorkloadState.RUNNING,
        submitted_at=started,
    )
    run = Run.objects.create(
        workload=workload,
        attempt=1,
        project=project,
        cluster=cluster,
        gpus=gpus,
        lane=RunLane.CHARGED,
        placement={node.name: gpus},
        started_at=started,
        accounted_until=started,
        **fields,
    )
    RunNode.objects.create(run=run, node=node, gpus=gpus)
    return run


class Timeline(NamedTuple):
    """The moments the made-up usage turns on."""

    now: datetime
    this_hour: datetime
    first: datetime  # the first hour of usage, DAYS days before today's midnight
    node_down: datetime  # n12 stopped answering
    drain_done: datetime  # n20's drain began (finished three hours later)


class Wanted(NamedTuple):
    """One project's hour: its effective share, what it asked for, what ran, free-lane GPUs."""

    share: Decimal
    demand: int
    ran: int
    free: int


def _timeline() -> Timeline:
    now = timezone.now().astimezone(UTC)
    this_hour = now.replace(minute=0, second=0, microsecond=0)
    return Timeline(
        now=now,
        this_hour=this_hour,
        first=this_hour.replace(hour=0) - timedelta(days=DAYS),
        node_down=this_hour - timedelta(days=2),
        drain_done=this_hour - timedelta(hours=20),
    )


def _wanted(projects, shares, appetite, hour, first, rng: random.Random) -> dict[int, Wanted]:
    """What each project wanted and ran in ``hour``, before scaling to the healthy GPUs."""
    daily = 0.75 + 0.25 * math.sin(2 * math.pi * hour.hour / 24)
    wanted = {}
    for project in projects:
        program_share = shares.get(("program", project.program_id), Decimal(0))
        share = program_share * shares.get(("project", project.pk), Decimal(0)) / 10000
        # Appetite drifts day by day so the fair-share order moves.
        drift = 1 + 0.5 * math.sin((hour - first).days / 2 + project.pk)
        demand = int(float(share) * 256 * appetite[project.pk] * drift * daily * 1.4)
        ran = int(demand * rng.uniform(0.7, 1.0))
        free = rng.choice([0, 0, 0, 2, 4])
        wanted[project.pk] = Wanted(share, demand, ran, free)
    return wanted


def _usage_hours(
    cluster: Cluster, projects, times: Timeline, rng: random.Random
) -> list[UsageHour]:
    """The hourly rollups from ``times.first`` to this hour, as accounting writes them."""
    allocations = [ShareRow.from_allocation(a) for a in Allocation.objects.filter(cluster=cluster)]
    appetite = {p.pk: rng.uniform(0.4, 1.8) for p in projects}
    rows = []
    hour = times.first
    while hour < times.this_hour:
        # Shares in force that hour (the demo has an applied change in its history).
        shares = pick_shares(allocations, hour)
        healthy = (
            256 - (8 if hour >= times.node_down else 0) - (8 if hour >= times.drain_done else 0)
        )
        wanted = _wanted(projects, shares, appetite, hour, times.first, rng)
        # What ran never exceeds the healthy GPUs: scale everyone down when it would.
        total = sum(ran + free for _, _, ran, free in wanted.values())
        scale = min(1.0, healthy * 0.97 / total) if total else 1.0
        for project in projects:
            share, demand, ran, free = wanted[project.pk]
            entitled = (share * healthy * 3600).quantize(Decimal("0.000001"))
            charged = Decimal(int(ran * scale) * 3600)
            rows.append(
                UsageHour(
                    cluster=cluster,
                    project=project,
                    hour=hour,
                    budgeted_gpu_seconds=min(charged, entitled),
                    burst_gpu_seconds=max(charged - entitled, Decimal(0)),
                    free_gpu_seconds=Decimal(int(free * scale) * 3600),
                    entitled_gpu_seconds=entitled,
                    demand_gpu_seconds=Decimal(demand * 3600),
                )
            )
        hour += timedelta(hours=1)
    return rows


def _nodes(cluster: Cluster, admin, times: Timeline) -> dict[str, Node]:
    """32 nodes: n12 down two days ago, n20 drained yesterday, n07 draining now."""
    nodes = {
        f"n{i:02d}": Node.objects.create(cluster=cluster, name=f"n{i:02d}", gpus=8)
        for i in range(32)
    }
    Node.objects.filter(pk=nodes["n12"].pk).update(
        state=NodeState.DOWN, state_changed_at=times.node_down, state_reason="No heartbeat"
    )
    Node.objects.filter(pk=nodes["n20"].pk).update(
        state=NodeState.DRAINED, state_changed_at=times.drain_done + timedelta(hours=3)
    )
    Node.objects.filter(pk=nodes["n07"].pk).update(
        state=NodeState.DRAINING,
        state_changed_at=times.now - timedelta(hours=3),
        state_changed_by=admin,
        state_reason="ECC errors on GPU 3",
    )
    return nodes


def _drain_runs(cluster: Cluster, busy: Project, nodes: dict[str, Node], times: Timeline) -> None:
    """Two runs still on the draining n07; three runs the n20 drain stopped one by one."""
    now, drain_done = times.now, times.drain_done
    _run(
        busy, cluster, nodes["n07"], gpus=4, started=now - timedelta(hours=5), min_runtime=8 * 3600
    )
    _run(busy, cluster, nodes["n07"], gpus=2, started=now - timedelta(hours=4), min_runtime=14400)
    for minutes in (0, 95, 170):
        _run(
            busy,
            cluster,
            nodes["n20"],
            gpus=2,
            started=drain_done - timedelta(hours=6),
            min_runtime=3600,
            stop_requested_at=drain_done + timedelta(minutes=minutes),
            stop_reason=RunEndReason.DRAINED,
            ended_at=drain_done + timedelta(minutes=minutes + 1),
            end_reason=RunEndReason.DRAINED,
        )


def build_usage(cluster: Cluster, admin) -> None:
    """Ten days of hourly rollups, 32 nodes, a drain in progress and one finished."""
    rng = random.Random(5)
    times = _timeline()
    projects = list(Project.objects.filter(program__organization=cluster.organization))
    UsageHour.objects.bulk_create(_usage_hours(cluster, projects, times, rng), batch_size=2000)
    nodes = _nodes(cluster, admin, times)
    _drain_runs(cluster, projects[0], nodes, times)
    AccountingCursor.objects.create(cluster=cluster, accounted_until=times.this_hour)
    SchedulingCycle.objects.create(
        cluster=cluster,
        started_at=times.drain_done + timedelta(hours=3),
        duration_seconds=0.2,
        policy="fairshare",
        drained_nodes=["n20"],
    )


@pytest.fixture
def demo(transactional_db):
    """The demo organization and accounts (``load_demo``) with ten days of usage."""
    from governance.management.commands.load_demo import DEMO_ACCOUNTS
    from governance.models import RoleAssignment

    call_command("load_demo", verbosity=0)
    cluster = Cluster.objects.get(slug="h100")
    admin = RoleAssignment.objects.filter(role="org_admin").first().user
    build_usage(cluster, admin)
    return {username: password for username, password, _ in DEMO_ACCOUNTS}


def shoot(page, out_dir: Path, name: str) -> Path:
    """Save the PNG first (to look at it when a check fails), then check its width and size."""
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out_dir / f"{name}.png"), full_page=True)
    return shoot_and_check(page, out_dir, name)


def drawn(page, count: int) -> None:
    expect(page.locator("[data-figure][data-drawn=true]")).to_have_count(count)


def test_screenshots_of_every_dashboard(page, live_server, demo, out_dir):
    cluster = Cluster.objects.get(slug="h100")
    vision = Program.objects.get(slug="vision")
    base = f"{live_server.url}/dashboards"

    sign_in(page, live_server, "admin", demo["admin"])
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Dashboards").click()
    drawn(page, 2)
    shoot(page, out_dir, "20-dashboard-owed-vs-delivered")
    page.goto(f"{base}/delivery/?cluster={cluster.pk}&node=program-{vision.pk}&period=30d")
    drawn(page, 2)
    shoot(page, out_dir, "21-dashboard-owed-vs-delivered-program")
    page.goto(f"{base}/fairshare/")
    drawn(page, 1)
    shoot(page, out_dir, "22-dashboard-fairshare")
    page.goto(f"{base}/health/")
    drawn(page, 2)
    shoot(page, out_dir, "23-dashboard-cluster-health")
    sign_out(page)

    sign_in(page, live_server, "pi", demo["pi"])
    page.goto(f"{base}/fairshare/")
    drawn(page, 1)
    shoot(page, out_dir, "24-dashboard-fairshare-pi")
    sign_out(page)

    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, live_server, "manager", demo["manager"])
    page.goto(f"{base}/delivery/")
    drawn(page, 2)
    shoot(page, out_dir, "25-dashboard-owed-vs-delivered-narrow")
    page.goto(f"{base}/fairshare/")
    drawn(page, 1)
    shoot(page, out_dir, "26-dashboard-fairshare-narrow")
    page.goto(f"{base}/health/")
    drawn(page, 2)
    shoot(page, out_dir, "27-dashboard-cluster-health-narrow")
