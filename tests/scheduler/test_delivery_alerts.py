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
from scheduler.services.delivery_alerts import delivery_alerts_check
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
