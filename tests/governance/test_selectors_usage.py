"""Usage figures per node of the tree (owed, charged, burst, unbudgeted, delivery ratios),
worked by hand on the personas' tree and checked against PostgreSQL.

The ledger rows are written here (``write_usage``) and the hourly rollup rebuilt from them by
the live loop's own ``usage_rebuild``, so the selectors read what production would.

Hand-worked scenario on h100, two hours (amounts in GPU-hours; H = 3600 GPU-seconds)::

    project        hour  entitled demand budgeted burst free | owed  min(charged, owed)
    Detection (A1)  h0      10      8       6       0     0  |   8     6
                    h1      10     12      10       2     0  |  10    10
    Segmentation    h0       6      0       0       0     3  |   0     0
    (A2)            h1       6      6       3       0     0  |   6     3
    Translation     h0       9      9       9       0     0  |   9     9
    (B1)            h1       9      4       4       0     0  |   4     4
    Unshared (B3,   h0       0      4       0       4     0  |   0     0
    no share)

    Detection:    owed 18, charged 18 → delivery 18/18 = 1, hourly 16/18, unbudgeted 2
    Segmentation: owed 6, charged 3 → 3/6 = 0.5, hourly 3/6, free 3, unbudgeted 3
    Vision:       owed 24, Σ min = 18 + 3 = 21 → 21/24 = 0.875, hourly 19/24
    Language:     owed 13, Σ min = 13 → 1, hourly 13/13 = 1, burst 4, unbudgeted 4
    Acme:         owed 37, Σ min = 34 → 34/37 (not min(38, 37)/37 = 1), hourly 32/37,
                  charged 38 (budgeted 32, burst 6), free 3, unbudgeted 9
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from governance.selectors.usage import usage_by_tree_node, usage_timeseries
from governance.selectors.visibility import user_visibility
from scheduler.choices import Charge, RunEndReason, RunLane, WorkloadState
from scheduler.models import EntitlementRecord, Run, UsageRecord, Workload
from scheduler.services.usage import usage_rebuild
from tests.factories import ProjectFactory

H = Decimal(3600)
H0 = datetime(2026, 10, 5, 10, tzinfo=UTC)
H1 = H0 + timedelta(hours=1)
START, END = H0, H0 + timedelta(hours=2)

pytestmark = pytest.mark.django_db


def _run(project, cluster, lane: str) -> Run:
    """The one run per project, cluster and lane that the written ledger rows belong to."""
    found = Run.objects.filter(project=project, cluster=cluster, lane=lane).first()
    if found:
        return found
    at = datetime(2020, 1, 1, tzinfo=UTC)
    workload = Workload.objects.create(
        project=project,
        cluster=cluster,
        name=f"ledger-{lane}",
        gpus=1,
        min_runtime_seconds=0 if lane == RunLane.FREE else 3600,
        state=WorkloadState.SUCCEEDED,
        submitted_at=at,
    )
    return Run.objects.create(
        workload=workload,
        attempt=1,
        project=project,
        cluster=cluster,
        gpus=1,
        lane=lane,
        started_at=at,
        ended_at=at + timedelta(days=3650),
        end_reason=RunEndReason.SUCCEEDED,
        accounted_until=at,
    )


def write_usage(
    project,
    cluster,
    hour: datetime,
    *,
    budgeted=Decimal(0),
    burst=Decimal(0),
    free=Decimal(0),
    entitled=Decimal(0),
    demand=Decimal(0),
) -> None:
    """Ledger rows for one project-hour, amounts in GPU-seconds, shaped like accounting's:
    the charged run's budgeted piece from the top of the hour, burst right after it, the
    free-lane run beside them, and one entitlement record. Rebuild the rollup afterwards."""
    budgeted, burst, free = Decimal(budgeted), Decimal(burst), Decimal(free)
    charged = budgeted + burst
    if charged:
        run = _run(project, cluster, RunLane.CHARGED)
        gpus = max(1, math.ceil(charged / H))  # so the pieces fit in the hour
        split = hour + timedelta(seconds=float(budgeted / gpus))
        for start, end, amount, charge in (
            (hour, split, budgeted, Charge.BUDGETED),
            (split, hour + timedelta(hours=1), burst, Charge.BURST),
        ):
            if amount:
                UsageRecord.objects.create(
                    run=run,
                    project=project,
                    cluster=cluster,
                    interval_start=start,
                    interval_end=end,
                    gpus=gpus,
                    gpu_seconds=amount,
                    charge=charge,
                )
    if free:
        UsageRecord.objects.create(
            run=_run(project, cluster, RunLane.FREE),
            project=project,
            cluster=cluster,
            interval_start=hour,
            interval_end=hour + timedelta(hours=1),
            gpus=max(1, int(free // H)),
            gpu_seconds=free,
            charge=Charge.FREE,
        )
    if entitled or demand:
        EntitlementRecord.objects.create(
            project=project,
            cluster=cluster,
            interval_start=hour,
            interval_end=hour + timedelta(hours=1),
            effective_share=Decimal(0),
            healthy_gpus=cluster.total_gpus,
            demand_gpus=int(Decimal(demand) // H),
            entitled_gpu_seconds=entitled,
            demand_gpu_seconds=demand,
        )


def write_scenario(personas):
    """The module docstring's two hours, written to the ledger and rolled up; the personas
    with the unshared project added."""
    p, c = personas, personas.cluster
    unshared = ProjectFactory(program=p.program_b, name="Unshared", slug="unshared")
    rows = [
        (p.project_a1, H0, {"entitled": 10, "demand": 8, "budgeted": 6}),
        (p.project_a1, H1, {"entitled": 10, "demand": 12, "budgeted": 10, "burst": 2}),
        (p.project_a2, H0, {"entitled": 6, "demand": 0, "free": 3}),
        (p.project_a2, H1, {"entitled": 6, "demand": 6, "budgeted": 3}),
        (p.project_b1, H0, {"entitled": 9, "demand": 9, "budgeted": 9}),
        (p.project_b1, H1, {"entitled": 9, "demand": 4, "budgeted": 4}),
        (unshared, H0, {"demand": 4, "burst": 4}),
    ]
    for project, hour, hours in rows:
        write_usage(project, c, hour, **{k: Decimal(v) * H for k, v in hours.items()})
    usage_rebuild(cluster=c)
    p.unshared = unshared
    return p


@pytest.fixture
def scenario(personas):
    """The module docstring's two hours, written to the ledger and rolled up."""
    return write_scenario(personas)


def _rows(user, cluster, start=START, end=END):
    rows = usage_by_tree_node(
        visibility=user_visibility(user=user), cluster=cluster, start=start, end=end
    )
    return {row.key: row for row in rows}, rows


def test_finance_sees_hand_worked_figures_for_every_node(scenario):
    by_key, rows = _rows(scenario.finance, scenario.cluster)
    detection = by_key[("project", scenario.project_a1.pk)]
    assert detection.owed_gpu_seconds == 18 * H
    assert detection.charged_gpu_seconds == 18 * H
    assert detection.budgeted_gpu_seconds == 16 * H
    assert detection.burst_gpu_seconds == 2 * H
    assert detection.unbudgeted_gpu_seconds == 2 * H
    assert detection.delivery_ratio == Decimal(1)
    assert detection.hourly_delivery_ratio == Decimal(16) / Decimal(18)
    assert detection.owed_gpu_hours == Decimal(18)

    segmentation = by_key[("project", scenario.project_a2.pk)]
    assert segmentation.owed_gpu_seconds == 6 * H
    assert segmentation.charged_gpu_seconds == 3 * H
    assert segmentation.free_gpu_seconds == 3 * H
    assert segmentation.unbudgeted_gpu_seconds == 3 * H
    assert segmentation.delivery_ratio == Decimal("0.5")
    assert segmentation.hourly_delivery_ratio == Decimal("0.5")

    unshared = by_key[("project", scenario.unshared.pk)]
    assert unshared.owed_gpu_seconds == 0
    assert unshared.burst_gpu_seconds == 4 * H
    assert unshared.unbudgeted_gpu_seconds == 4 * H
    assert unshared.delivery_ratio is None
    assert unshared.hourly_delivery_ratio is None

    vision = by_key[("program", scenario.program_a.pk)]
    assert vision.owed_gpu_seconds == 24 * H
    assert vision.delivery_ratio == Decimal(21) / Decimal(24)
    assert vision.hourly_delivery_ratio == Decimal(19) / Decimal(24)

    language = by_key[("program", scenario.program_b.pk)]
    assert language.owed_gpu_seconds == 13 * H
    assert language.delivery_ratio == Decimal(1)
    assert language.charged_gpu_seconds == 17 * H
    assert language.burst_gpu_seconds == 4 * H
    assert language.unbudgeted_gpu_seconds == 4 * H

    acme = by_key[("organization", scenario.organization.pk)]
    assert acme.owed_gpu_seconds == 37 * H
    assert acme.charged_gpu_seconds == 38 * H
    assert acme.budgeted_gpu_seconds == 32 * H
    assert acme.burst_gpu_seconds == 6 * H
    assert acme.free_gpu_seconds == 3 * H
    assert acme.unbudgeted_gpu_seconds == 9 * H
    assert acme.total_gpu_seconds == 41 * H
    # Org-wide = Σ min(charged, owed) over teams ÷ Σ owed, not min(Σ charged, Σ owed) ÷ Σ owed.
    assert acme.delivery_ratio == Decimal(34) / Decimal(37)
    assert acme.hourly_delivery_ratio == Decimal(32) / Decimal(37)

    # Depth-first: organization, Language and its projects, Vision and its projects (by name).
    assert [(r.kind, r.name) for r in rows] == [
        ("organization", "Acme Research"),
        ("program", "Language"),
        ("project", "Summaries"),
        ("project", "Translation"),
        ("project", "Unshared"),
        ("program", "Vision"),
        ("project", "Detection"),
        ("project", "Segmentation"),
    ]


def test_every_parent_is_the_exact_sum_of_its_children(scenario):
    _, rows = _rows(scenario.org_admin, scenario.cluster)
    fields = [
        "budgeted_gpu_seconds",
        "burst_gpu_seconds",
        "free_gpu_seconds",
        "entitled_gpu_seconds",
        "demand_gpu_seconds",
        "owed_gpu_seconds",
        "unbudgeted_gpu_seconds",
        "owed_delivered_gpu_seconds",
        "hourly_owed_delivered_gpu_seconds",
    ]
    for parent in rows:
        children = [r for r in rows if r.parent == parent.key]
        if parent.kind == "project":
            continue
        assert children
        for name in fields:
            assert getattr(parent, name) == sum(getattr(c, name) for c in children), name


def test_period_bounds_select_whole_hours(scenario):
    by_key, _ = _rows(scenario.finance, scenario.cluster, start=H1, end=END)
    detection = by_key[("project", scenario.project_a1.pk)]
    assert detection.owed_gpu_seconds == 10 * H
    assert detection.charged_gpu_seconds == 12 * H
    assert detection.delivery_ratio == Decimal(1)


def test_program_manager_sees_their_program_and_projects_only(scenario):
    _, rows = _rows(scenario.program_manager, scenario.cluster)
    assert [(r.kind, r.name) for r in rows] == [
        ("program", "Vision"),
        ("project", "Detection"),
        ("project", "Segmentation"),
    ]
    assert rows[0].delivery_ratio == Decimal(21) / Decimal(24)


def test_pi_and_researcher_see_their_project_only(scenario):
    for user in (scenario.pi, scenario.researcher):
        _, rows = _rows(user, scenario.cluster)
        assert [(r.kind, r.name) for r in rows] == [("project", "Detection")]
        assert rows[0].owed_gpu_seconds == 18 * H


def test_outsider_sees_nothing(scenario):
    _, rows = _rows(scenario.outsider, scenario.cluster)
    assert rows == []


def test_all_clusters_sum_per_cluster_minimums(scenario):
    """On two clusters, min(charged, owed) is taken per cluster before summing."""
    from tests.factories import ClusterFactory

    b200 = ClusterFactory(organization=scenario.organization, name="b200", slug="b200")
    # Detection on b200: owed 5, charged 9 → min 5 (its surplus does not cover h100's).
    write_usage(scenario.project_a1, b200, H0, entitled=5 * H, demand=9 * H, budgeted=5 * H)
    write_usage(scenario.project_a1, b200, H1, burst=4 * H)
    usage_rebuild(cluster=b200)
    by_key, _ = _rows(scenario.finance, None)
    detection = by_key[("project", scenario.project_a1.pk)]
    assert detection.cluster_id is None
    assert detection.owed_gpu_seconds == 23 * H
    assert detection.charged_gpu_seconds == 27 * H
    assert detection.owed_delivered_gpu_seconds == 23 * H
    assert detection.hourly_owed_delivered_gpu_seconds == 21 * H


def test_figures_are_the_same_from_the_daily_cache(scenario):
    """Closed days read from UsageDay give exactly what the hourly rows give."""
    from governance.models import UsageDay
    from governance.services.reports import usage_days_refresh
    from scheduler.models import AccountingCursor

    start, end = datetime(2026, 10, 4, 6, tzinfo=UTC), datetime(2026, 10, 7, tzinfo=UTC)
    fields = [
        "budgeted_gpu_seconds",
        "burst_gpu_seconds",
        "free_gpu_seconds",
        "entitled_gpu_seconds",
        "demand_gpu_seconds",
        "owed_gpu_seconds",
        "unbudgeted_gpu_seconds",
        "owed_delivered_gpu_seconds",
        "hourly_owed_delivered_gpu_seconds",
    ]

    def figures():
        _, rows = _rows(scenario.finance, scenario.cluster, start=start, end=end)
        return [(r.key, *(getattr(r, f) for f in fields)) for r in rows]

    def daily_points():
        points = usage_timeseries(
            visibility=user_visibility(user=scenario.finance),
            cluster=scenario.cluster,
            start=start,
            end=end,
            bucket="day",
        )
        return [(p.start, p.owed_gpu_seconds, p.delivered_gpu_seconds) for p in points]

    hourly, hourly_points = figures(), daily_points()
    AccountingCursor.objects.create(
        cluster=scenario.cluster, accounted_until=datetime(2026, 10, 8, 3, tzinfo=UTC)
    )
    assert usage_days_refresh(cluster=scenario.cluster) == 3  # 5, 6, 7 October (from the 5th)
    assert usage_days_refresh(cluster=scenario.cluster) == 0  # idempotent
    day = UsageDay.objects.get(project=scenario.project_a1)
    assert day.owed_gpu_seconds == 18 * H
    assert day.hourly_owed_delivered_gpu_seconds == 16 * H
    assert figures() == hourly
    assert daily_points() == hourly_points
    assert hourly_points[1] == (datetime(2026, 10, 5, tzinfo=UTC), 37 * H, 38 * H)


@pytest.mark.parametrize("persona", ["finance", "org_admin", "program_manager", "pi"])
@pytest.mark.parametrize("cluster", ["h100", "all"])
def test_rows_are_the_same_whether_the_query_names_the_projects_or_not(
    scenario, monkeypatch, persona, cluster
):
    """Beyond a hundred projects the rollup query groups every project and the rows are
    filtered in Python: each persona must get exactly the rows and figures it got before."""
    import governance.selectors.usage as usage

    user = getattr(scenario, persona)
    the_cluster = scenario.cluster if cluster == "h100" else None
    _, named = _rows(user, the_cluster)
    monkeypatch.setattr(usage, "_LISTED_PROJECTS", 0)
    _, grouped = _rows(user, the_cluster)
    assert [vars(row) for row in grouped] == [vars(row) for row in named]
    assert named  # every persona here sees at least its own node
