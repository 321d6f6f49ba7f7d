"""The fair-share ranking selector against PostgreSQL, with hand-worked numbers.

The personas' tree (tests/personas.py): Vision 60 % (Detection 50 %, Segmentation 30 %),
Language 40 % (Translation 70 %, Summaries 30 %). Charged usage, all inside the 7-day window:

- two days ago, 10:00 UTC: Segmentation 10, Translation 20, Summaries 40 GPU-hours;
- yesterday, 10:00 UTC: Detection 30 GPU-hours.

Now (today 12:00 UTC): Vision used 40 of 100, Language 60 of 100 GPU-hours.
  Vision 0.40 ÷ 0.60 = 0.6667, Language 0.60 ÷ 0.40 = 1.5       → Vision goes first.
  Detection 30/40 ÷ 0.5 = 1.5, Segmentation 10/40 ÷ 0.3 = 0.8333 → Segmentation first.
  Translation 20/60 ÷ 0.7 = 0.4762, Summaries 40/60 ÷ 0.3 = 2.2222 → Translation first.
  Project order: Segmentation, Detection, Translation, Summaries.
At yesterday's midnight (Detection had not run yet): Vision 10/70 ÷ 0.6 = 0.2381, Language
  60/70 ÷ 0.4 = 2.1429; Detection 0, Segmentation 10/10 ÷ 0.3 = 3.3333 → Detection first.
Two days ago at midnight nothing was used: no metric (None), ties by name (language < vision,
  detection < segmentation).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from governance.selectors.fairshare import fairshare_ranking
from governance.selectors.visibility import user_visibility
from governance.services.reports import usage_days_refresh
from scheduler.models import AccountingCursor, UsageHour
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

GPU_HOUR = Decimal(3600)


def today_midnight() -> datetime:
    return timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def charge(
    personas, project, hour: datetime, gpu_hours: int, *, burst: int = 0, free: int = 0
) -> None:
    UsageHour.objects.create(
        cluster=personas.cluster,
        project=project,
        hour=hour,
        budgeted_gpu_seconds=GPU_HOUR * gpu_hours,
        burst_gpu_seconds=GPU_HOUR * burst,
        free_gpu_seconds=GPU_HOUR * free,
    )


@pytest.fixture
def usage(personas):
    today = today_midnight()
    two_days_ago = today - timedelta(days=2) + timedelta(hours=10)
    yesterday = today - timedelta(days=1) + timedelta(hours=10)
    charge(personas, personas.project_a2, two_days_ago, 10)
    charge(personas, personas.project_b1, two_days_ago, 15, burst=5)
    charge(personas, personas.project_b2, two_days_ago, 40)
    # Free-lane time counts for nothing in fair share.
    charge(personas, personas.project_a1, yesterday, 30, free=500)
    return today + timedelta(hours=12)


def rows_by_name(view):
    return {row.name: row for row in view.rows}


def test_org_admin_sees_the_engine_ranking_of_every_node(personas, usage):
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.org_admin),
        cluster=personas.cluster,
        now=usage,
        days=3,
    )
    rows = rows_by_name(view)
    assert rows["Vision"].metric == pytest.approx(0.4 / 0.6)
    assert rows["Language"].metric == pytest.approx(1.5)
    assert rows["Detection"].metric == pytest.approx(1.5)
    assert rows["Segmentation"].metric == pytest.approx(0.25 / 0.3)
    assert rows["Translation"].metric == pytest.approx((20 / 60) / 0.7)
    assert rows["Summaries"].metric == pytest.approx((40 / 60) / 0.3)
    assert (rows["Vision"].sibling_rank, rows["Language"].sibling_rank) == (1, 2)
    assert (rows["Segmentation"].sibling_rank, rows["Detection"].sibling_rank) == (1, 2)
    assert (rows["Translation"].sibling_rank, rows["Summaries"].sibling_rank) == (1, 2)
    assert rows["Vision"].siblings == 2
    # Depth-first in ranking order: each parent, then its children first-to-go first.
    assert [r.name for r in view.rows] == [
        "Acme Research",
        "Vision",
        "Segmentation",
        "Detection",
        "Language",
        "Translation",
        "Summaries",
    ]
    assert [r.name for r in view.project_order] == [
        "Segmentation",
        "Detection",
        "Translation",
        "Summaries",
    ]
    assert [r.order_position for r in view.project_order] == [1, 2, 3, 4]
    # Charged GPU-hours over the window (burst counts, free does not).
    assert rows["Acme Research"].usage_gpu_hours == pytest.approx(100)
    assert rows["Vision"].usage_gpu_hours == pytest.approx(40)
    assert rows["Translation"].usage_gpu_hours == pytest.approx(20)
    assert rows["Vision"].usage_share == pytest.approx(40)
    assert rows["Detection"].share == Decimal("50.00")


def test_history_shows_how_the_order_changed_day_by_day(personas, usage):
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.org_admin),
        cluster=personas.cluster,
        now=usage,
        days=3,
    )
    today = today_midnight()
    assert view.instants == [
        today - timedelta(days=2),
        today - timedelta(days=1),
        today,
        usage,
    ]
    rows = rows_by_name(view)
    # Two days ago nothing had been used under Vision: no metric (None), ranks by name.
    assert rows["Detection"].history[0] is None
    assert rows["Detection"].history[1:] == pytest.approx([0.0, 1.5, 1.5])
    assert rows["Segmentation"].history[1:] == pytest.approx([1 / 0.3, 0.25 / 0.3, 0.25 / 0.3])
    assert rows["Detection"].rank_history == [1, 1, 2, 2]
    assert rows["Segmentation"].rank_history == [2, 2, 1, 1]
    assert rows["Vision"].history[0] is None
    assert rows["Vision"].history[1:] == pytest.approx([(10 / 70) / 0.6, 0.4 / 0.6, 0.4 / 0.6])
    assert rows["Language"].rank_history == [1, 2, 2, 2]


def test_a_project_without_a_share_comes_after_every_budgeted_one(personas, usage):
    ProjectFactory(program=personas.program_b, name="Newcomer", slug="newcomer")
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.org_admin),
        cluster=personas.cluster,
        now=usage,
        days=1,
    )
    row = rows_by_name(view)["Newcomer"]
    assert row.budgeted is False
    assert row.metric is None and row.sibling_rank is None
    assert row.order_position == 5
    assert row.share == Decimal("0")
    assert view.budgeted_projects == 4 and view.total_projects == 5
    assert [r.name for r in view.rows][-1] == "Newcomer"


def test_program_manager_sees_their_program_and_ranks_but_not_other_totals(personas, usage):
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.program_manager),
        cluster=personas.cluster,
        now=usage,
        days=1,
    )
    rows = rows_by_name(view)
    assert set(rows) == {"Acme Research", "Vision", "Detection", "Segmentation"}
    assert rows["Vision"].usage_gpu_hours == pytest.approx(40)
    assert rows["Acme Research"].usage_gpu_hours is None  # would reveal Language's usage
    assert rows["Vision"].sibling_rank == 1 and rows["Vision"].siblings == 2
    assert [r.order_position for r in view.project_order] == [1, 2]


def test_pi_sees_their_project_and_its_place_only(personas, usage):
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.pi),
        cluster=personas.cluster,
        now=usage,
        days=1,
    )
    rows = rows_by_name(view)
    assert set(rows) == {"Acme Research", "Vision", "Detection"}
    assert rows["Detection"].usage_gpu_hours == pytest.approx(30)
    assert rows["Vision"].usage_gpu_hours is None
    assert rows["Detection"].sibling_rank == 2
    assert rows["Detection"].order_position == 2


def test_outsider_sees_nothing(personas, usage):
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.outsider),
        cluster=personas.cluster,
        now=usage,
        days=1,
    )
    assert view.rows == [] and view.project_order == []


def test_with_no_usage_there_is_no_metric_and_names_break_ties(personas):
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.org_admin), cluster=personas.cluster, days=1
    )
    rows = rows_by_name(view)
    assert rows["Language"].metric is None and rows["Language"].sibling_rank == 1
    assert rows["Language"].budgeted is True
    assert [r.name for r in view.project_order] == [
        "Summaries",
        "Translation",
        "Detection",
        "Segmentation",
    ]


def test_history_from_the_daily_cache_is_the_same(personas, usage):
    visibility = user_visibility(user=personas.org_admin)
    before = fairshare_ranking(visibility=visibility, cluster=personas.cluster, now=usage, days=3)
    AccountingCursor.objects.create(cluster=personas.cluster, accounted_until=usage)
    assert usage_days_refresh(cluster=personas.cluster) >= 2
    after = fairshare_ranking(visibility=visibility, cluster=personas.cluster, now=usage, days=3)
    assert [r.history for r in after.rows] == [r.history for r in before.rows]
    assert [r.rank_history for r in after.rows] == [r.rank_history for r in before.rows]


def test_a_kept_history_follows_a_corrected_share(personas, usage):
    """The past instants' ranking is kept while their usage is final, but not past a change
    of the tree's share rows: corrected to Vision 50 %, Language 50 % for all time, the
    ranking at yesterday's midnight is Vision 10/70 ÷ 0.5 = 0.2857, Language 60/70 ÷ 0.5 =
    1.7143 (it was 0.2381 and 2.1429), on the second visit as on the first."""
    from governance.models import Allocation

    AccountingCursor.objects.create(cluster=personas.cluster, accounted_until=usage)
    assert usage_days_refresh(cluster=personas.cluster) >= 2
    visibility = user_visibility(user=personas.org_admin)

    def vision_and_language():
        view = fairshare_ranking(visibility=visibility, cluster=personas.cluster, now=usage, days=3)
        rows = rows_by_name(view)
        return rows["Vision"].history[1], rows["Language"].history[1]

    kept = [vision_and_language(), vision_and_language()]
    assert kept == [pytest.approx(((10 / 70) / 0.6, (60 / 70) / 0.4))] * 2
    for program in (personas.program_a, personas.program_b):
        Allocation.objects.filter(program=program).update(percent=Decimal(50))
    assert vision_and_language() == pytest.approx(((10 / 70) / 0.5, (60 / 70) / 0.5))


def test_a_new_installation_has_an_hourly_history(personas):
    """Five hours of accounting: fourteen daily points would be one dot and "now"; the
    history has a point at the end of every hour since accounting began."""
    now = datetime(2026, 3, 10, 14, 20, tzinfo=UTC)
    AccountingCursor.objects.create(
        cluster=personas.cluster, accounted_from=now - timedelta(hours=5), accounted_until=now
    )
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.org_admin), cluster=personas.cluster, now=now
    )
    hours = [datetime(2026, 3, 10, h, tzinfo=UTC) for h in (10, 11, 12, 13, 14)]
    assert view.instants == [*hours, now]
    assert view.hourly


def test_weeks_of_accounting_keep_daily_points(personas):
    now = datetime(2026, 3, 10, 14, 20, tzinfo=UTC)
    AccountingCursor.objects.create(
        cluster=personas.cluster, accounted_from=now - timedelta(days=20), accounted_until=now
    )
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.org_admin), cluster=personas.cluster, now=now
    )
    assert len(view.instants) == 15 and not view.hourly


def _running(personas, project, gpus: int, *, free: bool = False, stopping: bool = False):
    from scheduler.choices import RunLane, WorkloadState
    from scheduler.models import Run, Workload

    now = timezone.now()
    workload = Workload.objects.create(
        project=project, cluster=personas.cluster, name=f"w-{project.slug}-{gpus}", gpus=gpus,
        min_runtime_seconds=0 if free else 3600, state=WorkloadState.RUNNING,
        submitted_at=now - timedelta(hours=1),
    )  # fmt: skip
    Run.objects.create(
        workload=workload, attempt=1, project=project, cluster=personas.cluster, gpus=gpus,
        lane=RunLane.FREE if free else RunLane.CHARGED, placement={"n0": gpus},
        started_at=now - timedelta(minutes=30), accounted_until=now,
        stop_requested_at=now if stopping else None,
    )  # fmt: skip


def _two_below_their_entitlement(personas) -> None:
    """The world of the test below: 100 healthy GPUs, Translation and Summaries below
    their entitlements."""
    from scheduler.choices import NodeState
    from scheduler.models import Node

    for i in range(4):
        Node.objects.create(cluster=personas.cluster, name=f"n{i}", gpus=25)
    Node.objects.create(cluster=personas.cluster, name="n9", gpus=25, state=NodeState.DRAINED)
    _running(personas, personas.project_a2, 18)
    _running(personas, personas.project_a2, 8, free=True)
    _running(personas, personas.project_a1, 40)
    _running(personas, personas.project_b1, 10)
    _running(personas, personas.project_b2, 20, stopping=True)


def test_projects_below_their_entitlement_are_offered_gpus_first(personas, usage):
    """100 healthy GPUs (a drained node's do not count): entitlements Detection 30,
    Segmentation 18, Translation 28, Summaries 12 (effective shares 30/18/28/12 %).
    Running charged now: Segmentation 18 (at its entitlement; its free-lane run does not
    count), Detection 40 (above), Translation 10 (below), Summaries 0 (below; its stopping
    run does not count). The next cycle offers free GPUs to Summaries (0 of its 12) and
    Translation (10 of its 28) first, the one holding the smaller part of its entitlement
    first, then to everyone in ranking order: Segmentation, Detection."""
    _two_below_their_entitlement(personas)
    view = fairshare_ranking(
        visibility=user_visibility(user=personas.org_admin),
        cluster=personas.cluster,
        now=usage,
        days=1,
    )

    rows = rows_by_name(view)
    assert [r.name for r in view.project_order] == [
        "Summaries",
        "Translation",
        "Segmentation",
        "Detection",
    ]
    assert [r.order_position for r in view.project_order] == [1, 2, 3, 4]
    assert {n: (rows[n].running_gpus, rows[n].entitled_gpus) for n in rows if n in (
        "Detection", "Segmentation", "Translation", "Summaries")} == {
        "Detection": (40, 30),
        "Segmentation": (18, 18),
        "Translation": (10, 28),
        "Summaries": (0, 12),
    }  # fmt: skip
    assert [n for n in rows if rows[n].below_entitlement] == ["Translation", "Summaries"]
    # The ranking itself is unchanged: Segmentation still ranks first inside Vision.
    assert rows["Segmentation"].sibling_rank == 1


def test_the_order_says_a_project_below_its_entitlement_is_served_with_the_others_below(
    client, personas, usage
):
    """The page's "Project order now": Translation (10 of its 28 GPUs) is second, after
    Summaries (0 of 12), so it is not "served first" (as the line once said) but with the
    projects below their entitlement, ahead of the ranking."""
    from django.urls import reverse

    _two_below_their_entitlement(personas)
    client.force_login(personas.org_admin)
    html = client.get(reverse("dashboards:fairshare")).content.decode()
    line = (
        'Translation</span> <span class="muted small">below its entitlement (10 of 28 GPUs): '
        "served with the projects below theirs, ahead of the ranking; then Language"
    )
    assert line in html
    assert "served first" not in html


def test_the_page_states_the_order_inside_a_project_as_the_engine_keeps_it(client, personas, usage):
    """Inside a project the engine orders by priority, minimum runtime, then a debug job's
    place in its submitter's burst, then submit time (``FairShare.key``); the page once left
    the burst out, so a researcher whose lone debug job went ahead of a colleague's earlier
    sweep could not tell why."""
    from django.urls import reverse

    client.force_login(personas.org_admin)
    html = client.get(reverse("dashboards:fairshare")).content.decode()
    assert (
        "Inside a project: its own priority, then the shorter minimum runtime, then, for debug "
        "work, a lone job or the first of a burst before the rest of someone's sweep, then "
        "the earlier submit."
    ) in html
