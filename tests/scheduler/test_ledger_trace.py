"""The ledger as a trace: a hand-built history, row by row (``ledger_trace``'s rule)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from scheduler.choices import RunEndReason, RunLane, WorkloadState
from scheduler.models import Run, UsageHour, Workload
from scheduler.selectors.ledger_trace import ledger_trace
from tests.scheduler.conftest import build_world

pytestmark = pytest.mark.django_db

S = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)  # the window's start
E = S + timedelta(days=2)  # its end
NOW = E + timedelta(hours=1)
H = timedelta(hours=1)
WEEK = 7 * 86400


def workload(world, name, state, submitted, *, resumable=True, declared=None, runs=(), gpus=2):
    w = Workload.objects.create(
        project=world.projects["budgeted"], cluster=world.cluster, name=name, gpus=gpus,
        min_runtime_seconds=900, resumable=resumable, state=state, submitted_at=submitted,
        declared_duration_seconds=declared, submitted_by=world.user,
    )  # fmt: skip
    for attempt, (started, ended) in enumerate(runs, start=1):
        Run.objects.create(
            workload=w, attempt=attempt, project=w.project, cluster=world.cluster, gpus=gpus,
            lane=RunLane.CHARGED, started_at=started, ended_at=ended,
            end_reason=RunEndReason.SUCCEEDED if ended else "", accounted_until=ended or NOW,
        )  # fmt: skip
    return w


def test_each_kind_of_workload_is_treated_by_the_rule():
    world = build_world()
    done = WorkloadState.SUCCEEDED
    w = {
        # Resumable, preempted once: 1 h + 1.5 h.
        "resumed": workload(world, "resumed", done, S, runs=[(S + H, S + 2 * H), (S + 3 * H, S + 4.5 * H)]),
        # Non-resumable: only its last run (30 min) did the work.
        "restarted": workload(world, "restarted", WorkloadState.FAILED, S + H, resumable=False,
                              runs=[(S + H, S + 2 * H), (S + 5 * H, S + 5.5 * H)]),
        "never-ran": workload(world, "never-ran", WorkloadState.CANCELLED, S + 2 * H),
        "cancelled": workload(world, "cancelled", WorkloadState.CANCELLED, S + 3 * H,
                              runs=[(S + 3 * H, S + 3 * H + timedelta(minutes=20))]),
        # Open since E - 1 h: 2 h until NOW, more than the 10 min it declared.
        "running": workload(world, "running", WorkloadState.RUNNING, E - 2 * H, declared=600,
                            runs=[(E - H, None)]),
        "waiting": workload(world, "waiting", WorkloadState.PENDING, E - H, declared=5400),
        "unknown": workload(world, "unknown", WorkloadState.PENDING, E - H),
        "before": workload(world, "before", done, S - timedelta(seconds=1), runs=[(S, S + H)]),
        "at-end": workload(world, "at-end", done, E, runs=[(E, E + H)]),
    }  # fmt: skip
    result = ledger_trace(cluster=world.cluster, start=S, end=E, window_seconds=WEEK, now=NOW)
    jobs = [(j.id, j.submit_time, j.duration, j.gpus, j.project, j.min_runtime, j.resumable,
             j.submitter) for j in result.trace.jobs]  # fmt: skip
    user = str(world.user.id)
    key = "research/budgeted"
    assert jobs == [
        (str(w["resumed"].id), S.timestamp(), 9000.0, 2, key, 900.0, True, user),
        (str(w["restarted"].id), (S + H).timestamp(), 1800.0, 2, key, 900.0, False, user),
        (str(w["cancelled"].id), (S + 3 * H).timestamp(), 1200.0, 2, key, 900.0, True, user),
        (str(w["running"].id), (E - 2 * H).timestamp(), 7200.0, 2, key, 900.0, True, user),
        (str(w["waiting"].id), (E - H).timestamp(), 5400.0, 2, key, 900.0, True, user),
    ]
    assert result.counts == {
        "finished": 2,
        "left out: never ran": 1,
        "cancelled after running": 1,
        "still live": 2,
        "left out: waiting, no declared duration": 1,
    }
    assert result.trace.projects == [key]


def test_the_usage_window_before_the_start_is_carried_hour_by_hour():
    world = build_world()
    project = world.projects["budgeted"]

    def hour(at, budgeted, burst=0):
        UsageHour.objects.create(
            cluster=world.cluster, project=project, hour=at,
            budgeted_gpu_seconds=Decimal(budgeted), burst_gpu_seconds=Decimal(burst),
        )  # fmt: skip

    hour(S - H, 3600, burst=1800)  # the last hour before the start
    hour(S - 167 * H, 100)  # the oldest the 7-day window still reaches from S's hour
    hour(S - 168 * H, 999)  # out of reach
    hour(S, 777)  # the replay's own
    prior = ledger_trace(
        cluster=world.cluster, start=S + timedelta(minutes=30), end=E, window_seconds=WEEK
    ).prior
    assert list(prior) == ["research/budgeted"]
    hours = prior["research/budgeted"]
    assert len(hours) == 167
    assert (hours[0], hours[-1], sum(hours)) == (100.0, 5400.0, 5500.0)
