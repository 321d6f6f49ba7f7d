"""Screenshots of the pages that show GPU utilization, at 1,280 and 390 px, in headless Chromium.

``UPDATE_SCREENSHOTS=1`` writes ``docs/screenshots/80-…png`` onward; otherwise the PNGs go to
a temporary directory, so the suite still checks each page renders, draws its charts and
fits a 390 px screen. The world is the dashboards' screenshot world (the demo organization
with ten days of usage) plus the node agents' telemetry: seven projects in ten measured,
one row per project and hour with usage, each project busy a typical share of its GPU time;
and a notebook the idle rule marks idle after 90 minutes below 1 % busy.
"""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from governance.models import Cluster
from scheduler.choices import RunEndReason, RunLane, WorkloadState
from scheduler.models import Node, Run, UsageHour, UtilizationHour, Workload
from scheduler.services.utilization import idle_rule_apply, utilization_report
from tests.browser.conftest import sign_in, sign_out
from tests.browser.test_screenshots_dashboards import demo, drawn, out_dir, shoot  # noqa: F401
from tests.scheduler.test_utilization_store import item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MEASURED_SHARE = 7  # of 10 projects, by id


def add_telemetry(cluster: Cluster) -> Run:
    """Hourly telemetry for the measured projects' usage, and one run marked idle now."""
    rng = random.Random(11)
    node = Node.objects.get(cluster=cluster, name="n01")
    hours = list(UsageHour.objects.filter(cluster=cluster).order_by("hour", "project_id"))
    start, end = hours[0].hour, hours[-1].hour + timedelta(hours=1)
    runs: dict[int, Run] = {}
    rows = []
    for usage in hours:
        allocated = usage.budgeted_gpu_seconds + usage.burst_gpu_seconds + usage.free_gpu_seconds
        if usage.project_id % 10 >= MEASURED_SHARE or not allocated:
            continue
        run = runs.get(usage.project_id) or _history_run(usage.project, cluster, start, end)
        runs[usage.project_id] = run
        typical = 0.25 + 0.7 * ((usage.project_id * 37) % 100) / 100
        share = min(1.0, max(0.0, typical + rng.uniform(-0.15, 0.15)))
        rows.append(
            UtilizationHour(
                run=run,
                project_id=usage.project_id,
                cluster=cluster,
                node=node,
                hour=usage.hour,
                allocated_gpu_seconds=allocated,
                busy_gpu_seconds=(allocated * Decimal(str(round(share, 4)))).quantize(
                    Decimal("0.000001")
                ),
                samples=720,
                covered_from=usage.hour,
                reported_until=usage.hour + timedelta(hours=1),
                covered_seconds=Decimal(3600),
            )
        )
    UtilizationHour.objects.bulk_create(rows, batch_size=2000)
    return _idle_notebook(cluster, node, next(iter(runs.values())).project)


def _history_run(project, cluster, start, end) -> Run:
    workload = Workload.objects.create(
        project=project,
        cluster=cluster,
        name="training",
        gpus=8,
        min_runtime_seconds=3600,
        state=WorkloadState.SUCCEEDED,
        submitted_at=start,
        first_started_at=start,
        finished_at=end,
    )
    return Run.objects.create(
        workload=workload,
        attempt=1,
        project=project,
        cluster=cluster,
        gpus=8,
        lane=RunLane.CHARGED,
        started_at=start,
        ended_at=end,
        end_reason=RunEndReason.SUCCEEDED,
        accounted_until=end,
    )


def _idle_notebook(cluster, node, project) -> Run:
    """A 2-GPU notebook three hours old: busy for 90 minutes, then below 1 %; the idle rule
    marks it through the agents' own path."""
    now = timezone.now()
    started = now - timedelta(hours=3)
    workload = Workload.objects.create(
        project=project,
        cluster=cluster,
        name="notebook-anna",
        gpus=2,
        min_runtime_seconds=600,
        state=WorkloadState.RUNNING,
        submitted_at=started,
        first_started_at=started,
    )
    run = Run.objects.create(
        workload=workload,
        attempt=1,
        project=project,
        cluster=cluster,
        gpus=2,
        lane=RunLane.CHARGED,
        placement={node.name: 2},
        started_at=started,
        accounted_until=started,
    )
    run.node_set.through.objects.create(run=run, node=node, gpus=2)
    periods, at = [], started
    while at + timedelta(minutes=10) <= now:
        share = Decimal("0.6") if at < started + timedelta(minutes=90) else Decimal("0.008")
        periods.append(item(run, at, at + timedelta(minutes=10), 1200, 1200 * share))
        at += timedelta(minutes=10)
    utilization_report(node=node, reports=periods, now=now)
    assert idle_rule_apply(cluster=cluster, now=now)["marked"] == 1
    return run


def test_screenshots_of_the_utilization_pages(page, live_server, demo, out_dir):  # noqa: F811
    cluster = Cluster.objects.get(slug="h100")
    run = add_telemetry(cluster)
    base = live_server.url
    pages = [
        ("80-utilization-cluster-health", "/dashboards/health/", 3),
        ("81-utilization-workload", f"/workloads/{run.workload_id}/", 1),
        ("82-utilization-owed-vs-delivered", "/dashboards/delivery/", 2),
        ("83-utilization-usage-report", "/reports/usage/", 0),
    ]
    sign_in(page, live_server, "admin", demo["admin"])
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 844 if width == 390 else 800})
        for name, path, figures in pages:
            page.goto(f"{base}{path}")
            drawn(page, figures)
            if width == 390 and path.startswith("/reports/"):
                # The finance report's dozen columns scroll sideways on a phone (they always
                # have; it is read at a desk): the picture without the fit check.
                page.wait_for_load_state("networkidle")
                page.screenshot(path=str(out_dir / f"{name}-{width}.png"), full_page=True)
                continue
            shoot(page, out_dir, f"{name}-{width}")
    sign_out(page)
