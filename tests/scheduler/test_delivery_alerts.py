"""A team that got less than 90 % of what it was owed over the last 24 hours: its PI and
program manager are told, once a day; a team near its due, or owed almost nothing, is not."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from governance.choices import NotificationKind
from governance.models import Notification
from scheduler.models import UsageHour
from scheduler.services.delivery_alerts import delivery_alerts_check, month_usage_check
from tests.personas import build_personas

pytestmark = pytest.mark.django_db
HOUR = Decimal(3600)


def day_of_usage(p, project, *, entitled: int, demand: int, got: int, end) -> None:
    """24 hourly rollups ending at ``end``: GPUs entitled, demanded and running (budgeted)."""
    for h in range(24):
        UsageHour.objects.create(
            project=project, cluster=p.cluster, hour=end - timedelta(hours=h + 1),
            entitled_gpu_seconds=entitled * HOUR, demand_gpu_seconds=demand * HOUR,
            budgeted_gpu_seconds=got * HOUR, burst_gpu_seconds=0, free_gpu_seconds=0,
        )  # fmt: skip


def test_a_team_left_waiting_is_told_once_a_day(db):
    p = build_personas()
    now = timezone.localtime().replace(hour=12, minute=20)  # +30 min stays the same day
    end = now.replace(minute=0, second=0, microsecond=0)
    # Detection: owed 8 GPUs (entitled 8, wants 10), got 5: 62 %. Segmentation: 95 %.
    day_of_usage(p, p.project_a1, entitled=8, demand=10, got=5, end=end)
    day_of_usage(p, p.project_a2, entitled=8, demand=8, got=Decimal("7.6"), end=end)
    # Translation wanted nothing: owed nothing, whatever it got.
    day_of_usage(p, p.project_b1, entitled=8, demand=0, got=0, end=end)
    assert delivery_alerts_check(now=now) == 1
    told = Notification.objects.filter(kind=NotificationKind.TEAM_UNDER_DELIVERED)
    assert {n.recipient.username for n in told} == {"pi", "program_manager"}
    note = told.get(recipient=p.pi)
    assert (
        note.title == "Detection got 62% of the GPU-hours it was owed on h100 in the last 24 hours"
    )
    assert "Owed 192.0 GPU-hours" in note.body and "got 120.0" in note.body
    assert (
        note.link == f"/dashboards/delivery/?cluster={p.cluster.pk}&node=project-{p.project_a1.pk}"
    )
    assert delivery_alerts_check(now=now + timedelta(minutes=30)) == 1
    assert told.count() == 2  # not again the same day


def test_a_team_passing_a_share_of_its_month_is_told_once_per_threshold(db):
    p = build_personas()
    local = timezone.localtime()
    now = local.replace(day=11, hour=0, minute=20, second=0, microsecond=0)  # 10 days in
    month_start = now.replace(day=1, hour=0, minute=0)
    hours = (now.replace(minute=0) - month_start) // timedelta(hours=1)  # 240
    # Entitled 8 GPUs every hour: 4,300.8 to 4,761.6 GPU-hours are 80 % of a 28- to 31-day
    # month. Detection ran 20 GPUs for 240 h: 4,800 GPU-hours, past 80 % and short of 100 %
    # in any month; Segmentation 8 GPUs: 1,920 (33-36 %).
    for h in range(hours):
        at = month_start + timedelta(hours=h)
        for project, gpus in ((p.project_a1, 20), (p.project_a2, 8)):
            UsageHour.objects.create(
                project=project, cluster=p.cluster, hour=at,
                entitled_gpu_seconds=8 * HOUR, demand_gpu_seconds=gpus * HOUR,
                budgeted_gpu_seconds=8 * HOUR, burst_gpu_seconds=(gpus - 8) * HOUR,
                free_gpu_seconds=0,
            )  # fmt: skip
    days = ((month_start + timedelta(days=32)).replace(day=1) - month_start).days
    assert month_usage_check(now=now) == (1 if 0.8 * 8 * 24 * days <= 4800 else 0)
    told = Notification.objects.filter(kind=NotificationKind.MONTH_USAGE)
    if days == 31:  # 80 % of 5,952 is 4,761.6: passed too
        assert told.count() == 2
    assert {n.recipient.username for n in told} <= {"pi", "program_manager"}
    note = told.filter(recipient=p.pi).first()
    assert note.title == (f"Detection has used 80% of its entitlement for {now:%B %Y} on h100")
    assert "4,800.0 GPU-hours charged so far" in note.body
    before = told.count()
    assert month_usage_check(now=now + timedelta(minutes=30)) == 1  # still past: not again
    assert told.count() == before
