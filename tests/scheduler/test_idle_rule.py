"""The idle-allocation rule on hand-worked timelines (default policy: < 5 % for 30 minutes).

One run of 4 GPUs starts at 09:00; its agent reports every 10 minutes. "Idle" periods are
1 % busy (96 of 2,400 GPU-seconds), "busy" ones 100 %.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from governance.choices import NotificationKind
from governance.models import Notification
from scheduler.models import IdlePolicy, Run
from scheduler.services.utilization import idle_rule_apply, utilization_report
from tests.scheduler.test_utilization_store import T0, at, item, node_of, run_on

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db):
    from tests.personas import build_personas

    personas = build_personas()
    node = node_of(personas.cluster, "node-1")
    run = run_on(personas, node)
    Run.objects.filter(pk=run.pk).update(protected_until=T0 + timedelta(minutes=10))
    run.refresh_from_db()
    return personas, node, run


def report(node, run, start_minute: int, end_minute: int, busy_share: str) -> None:
    """10-minute periods from ``start_minute`` to ``end_minute`` (minutes after 09:00)."""
    items = []
    for minute in range(start_minute, end_minute, 10):
        allocated = Decimal(4 * 600)
        busy = None if busy_share == "none" else allocated * Decimal(busy_share)
        items.append(item(run, at(minutes=minute), at(minutes=minute + 10), allocated, busy))
    utilization_report(node=node, reports=items, now=at(minutes=end_minute))


def apply(personas, minute: int) -> dict:
    return idle_rule_apply(cluster=personas.cluster, now=at(minutes=minute))


def idle_notices(personas, run) -> int:
    return Notification.objects.filter(
        recipient=personas.researcher, event_key=f"run:{run.pk}:idle"
    ).count()


def test_marked_after_thirty_minutes_below_threshold(world):
    personas, node, run = world
    report(node, run, 0, 20, "0.01")
    # 09:20: telemetry covers 20 of the 30 minutes (09:00-09:20): cannot tell yet.
    assert apply(personas, 20) == {"marked": 0, "cleared": 0, "idle": 0}
    report(node, run, 20, 40, "0.01")
    # 09:40: the window 09:10-09:40 is covered (1,800 of the 09 hour's 2,400 s) at 1 %.
    assert apply(personas, 40) == {"marked": 1, "cleared": 0, "idle": 1}
    run.refresh_from_db()
    assert run.idle_since == at(minutes=40)
    assert idle_notices(personas, run) == 1
    notice = Notification.objects.get(event_key=f"run:{run.pk}:idle")
    assert "less than 5 %" in notice.title and "30 minutes" in notice.title
    assert notice.kind == NotificationKind.WORKLOAD_IDLE


def test_not_marked_inside_the_minimum_runtime(world):
    personas, node, run = world
    Run.objects.filter(pk=run.pk).update(protected_until=at(hours=1))
    report(node, run, 0, 50, "0")
    assert apply(personas, 50)["marked"] == 0
    run.refresh_from_db()
    assert run.idle_since is None
    # Past the minimum the same telemetry marks it.
    report(node, run, 50, 60, "0")
    assert apply(personas, 60)["marked"] == 1


def test_never_marked_without_telemetry(world):
    personas, node, run = world
    report(node, run, 0, 60, "none")
    assert apply(personas, 60) == {"marked": 0, "cleared": 0, "idle": 0}
    assert idle_notices(personas, run) == 0


def test_not_marked_when_busy_enough(world):
    personas, node, run = world
    report(node, run, 0, 40, "0.05")  # exactly 5 %: not below
    assert apply(personas, 40)["marked"] == 0


def test_cleared_when_busy_again_and_told_once(world):
    personas, node, run = world
    report(node, run, 0, 40, "0.01")
    assert apply(personas, 40)["marked"] == 1
    assert apply(personas, 41) == {"marked": 0, "cleared": 0, "idle": 1}  # told once
    report(node, run, 40, 80, "1")
    # 10:20, window 09:50-10:20: the 09 hour row (09:00-10:00: 14,400 allocated, 4,896 busy)
    # counts 600 of its 3,600 s (2,400 / 816), the 10 hour row in full (4,800 / 4,800):
    # 5,616 of 7,200 = 78 % busy.
    assert apply(personas, 80) == {"marked": 0, "cleared": 1, "idle": 0}
    run.refresh_from_db()
    assert run.idle_since is None
    # Idle again later: marked again, but the owner is not told a second time. The rule
    # reads hourly rows, so the busy start of the 10 hour keeps it above 5 % until the
    # window holds only the 11 hour (at 11:30).
    report(node, run, 80, 150, "0")
    assert apply(personas, 130)["marked"] == 0
    assert apply(personas, 150)["marked"] == 1
    assert idle_notices(personas, run) == 1


def test_disabled_policy_clears_and_marks_nothing(world):
    personas, node, run = world
    report(node, run, 0, 40, "0")
    assert apply(personas, 40)["marked"] == 1
    IdlePolicy.objects.create(cluster=personas.cluster, enabled=False)
    assert apply(personas, 41) == {"marked": 0, "cleared": 1, "idle": 0}
    run.refresh_from_db()
    assert run.idle_since is None
    report(node, run, 40, 80, "0")
    assert apply(personas, 80)["marked"] == 0


def test_policy_threshold_and_window_apply(world):
    personas, node, run = world
    IdlePolicy.objects.create(cluster=personas.cluster, busy_below_percent=50, for_minutes=10)
    report(node, run, 0, 20, "0.4")
    assert apply(personas, 20)["marked"] == 1


def test_ended_runs_are_not_judged(world):
    personas, node, run = world
    report(node, run, 0, 40, "0")
    Run.objects.filter(pk=run.pk).update(ended_at=at(minutes=40), end_reason="succeeded")
    assert apply(personas, 40) == {"marked": 0, "cleared": 0, "idle": 0}


def test_beat_runs_the_rule_every_minute_on_clusters_with_nodes(world, settings):
    from scheduler.tasks import idle_rule_apply_all

    entry = settings.CELERY_BEAT_SCHEDULE["idle-rule"]
    assert (entry["task"], entry["schedule"]) == ("scheduler.tasks.idle_rule_apply_all", 60)
    _, node, run = world
    recent = timezone.now() - timedelta(minutes=40)
    Run.objects.filter(pk=run.pk).update(started_at=recent, protected_until=recent)
    utilization_report(
        node=node,
        reports=[
            item(run, recent, recent + timedelta(minutes=39), 4 * 39 * 60, 0),
        ],
        now=timezone.now(),
    )
    assert idle_rule_apply_all() == 1
    run.refresh_from_db()
    assert run.idle_since is not None


def test_the_workload_page_flags_an_idle_run_with_the_rule(world, client):
    personas, node, run = world
    page = f"/workloads/{run.workload_id}/"
    client.force_login(personas.researcher)
    assert 'data-testid="idle"' not in client.get(page).content.decode()
    report(node, run, 0, 40, "0.01")
    apply(personas, 40)
    IdlePolicy.objects.filter(cluster=personas.cluster).delete()  # the defaults apply
    text = client.get(page).content.decode()
    assert 'data-testid="idle"' in text
    assert "busy less than 5 % for 30 minutes" in text
    assert "its time is still charged" in text  # a charged run (the free lane is not)
    Run.objects.filter(pk=run.pk).update(lane="free")
    assert "its time is still charged" not in client.get(page).content.decode()


def test_a_run_without_recorded_protection_is_protected_for_its_minimum_runtime(world):
    """A run the engine recorded no protection for (started before the record existed) is
    protected for its workload's minimum runtime, 1 h here: idle all along, it is not judged
    at 09:50 and is marked at 10:40, after 40 idle minutes past 10:00."""
    personas, node, run = world
    run.workload.min_runtime_seconds = 3600
    run.workload.save(update_fields=["min_runtime_seconds"])
    Run.objects.filter(pk=run.pk).update(protected_until=None)
    report(node, run, 0, 50, "0.01")
    assert apply(personas, 50)["marked"] == 0
    report(node, run, 50, 100, "0.01")
    assert apply(personas, 100) == {"marked": 1, "cleared": 0, "idle": 1}


def test_a_run_younger_than_the_window_is_not_judged(world):
    """Telemetry from 09:00 to 09:28 at 1 %: at 09:28 it covers 28 of the window's 30
    minutes, enough for the rule's coverage (an agent's latest minute may be late), but the
    run has not run for 30 minutes; it was marked at 09:28. Marked at 09:30."""
    personas, node, run = world
    allocated = Decimal(4 * 28 * 60)
    utilization_report(
        node=node,
        reports=[item(run, at(minutes=0), at(minutes=28), allocated, allocated / 100)],
        now=at(minutes=28),
    )
    assert apply(personas, 28) == {"marked": 0, "cleared": 0, "idle": 0}
    allocated = Decimal(4 * 2 * 60)
    utilization_report(
        node=node,
        reports=[item(run, at(minutes=28), at(minutes=30), allocated, allocated / 100)],
        now=at(minutes=30),
    )
    assert apply(personas, 30) == {"marked": 1, "cleared": 0, "idle": 1}
