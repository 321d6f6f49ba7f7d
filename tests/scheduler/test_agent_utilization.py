"""The agent's utilization reports: periods metered from samples, kept until stored."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from scheduler.agent.client import RequestRefused, TransientError
from scheduler.agent.telemetry import GpuSample
from scheduler.agent.utilization import UtilizationReporter

WALL0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC).timestamp()


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sampler:
    """Readings set by the test, returned at every sample."""

    status = "test"

    def __init__(self) -> None:
        self.busy: dict[str, float] = {}

    def sample(self) -> list[GpuSample]:
        return [
            GpuSample(index=g, busy_percent=b, memory_used_mib=1000) for g, b in self.busy.items()
        ]


def reporter(clock: Clock, sampler: Sampler) -> UtilizationReporter:
    return UtilizationReporter(
        sampler, sample_seconds=5, report_seconds=60, clock=clock, wall=lambda: WALL0
    )


def test_a_period_reports_allocated_and_busy_gpu_seconds_of_each_run():
    # Run 7 holds GPUs 0 and 1 from the start, 50 % and 100 % busy: over 60 s, 120
    # GPU-seconds allocated, 30 + 60 = 90 busy. Run 8 starts on GPU 2 at 30 s, idle (0 %):
    # 30 GPU-seconds allocated, 0 busy, its period from 10:00:30.
    clock, sampler = Clock(), Sampler()
    sampler.busy = {"0": 50.0, "1": 100.0, "2": 0.0}
    r = reporter(clock, sampler)
    r.tick({"7": ["0", "1"]})
    clock.now += 30
    r.tick({"7": ["0", "1"], "8": ["2"]})
    clock.now += 30
    r.tick({"7": ["0", "1"], "8": ["2"]})
    by_run = {p["run"]: p for p in r.pending}
    assert by_run[7]["start"] == "2026-12-05T10:00:00+00:00"
    assert by_run[7]["end"] == "2026-12-05T10:01:00+00:00"
    assert Decimal(by_run[7]["allocated_gpu_seconds"]) == 120
    assert Decimal(by_run[7]["busy_gpu_seconds"]) == 90
    assert by_run[7]["memory_max_mib"] == 1000
    assert by_run[8]["start"] == "2026-12-05T10:00:30+00:00"
    assert Decimal(by_run[8]["allocated_gpu_seconds"]) == 30
    assert Decimal(by_run[8]["busy_gpu_seconds"]) == 0


def test_a_run_that_ended_is_reported_up_to_its_end_then_forgotten():
    clock, sampler = Clock(), Sampler()
    sampler.busy = {"0": 100.0}
    r = reporter(clock, sampler)
    r.tick({"7": ["0"]})
    clock.now += 20
    r.tick({})  # the process ended after 20 s
    clock.now += 40
    r.tick({})
    [period] = r.pending
    assert period["end"] == "2026-12-05T10:00:20+00:00"
    assert Decimal(period["allocated_gpu_seconds"]) == 20
    assert Decimal(period["busy_gpu_seconds"]) == 20
    r.pending.clear()
    clock.now += 60
    r.tick({})
    assert r.pending == []


def test_gpus_that_report_no_busy_reading_give_no_busy_figure_never_zero():
    clock, sampler = Clock(), Sampler()
    sampler.busy = {}  # the GPU answers nothing
    r = reporter(clock, sampler)
    r.tick({"7": ["0"]})
    clock.now += 60
    r.tick({"7": ["0"]})
    [period] = r.pending
    assert period["busy_gpu_seconds"] is None
    assert Decimal(period["allocated_gpu_seconds"]) == 60


def test_flush_keeps_periods_while_the_server_is_away_and_drops_a_refused_batch():
    clock, sampler = Clock(), Sampler()
    sampler.busy = {"0": 10.0}
    r = reporter(clock, sampler)
    r.tick({"7": ["0"]})
    clock.now += 60
    r.tick({"7": ["0"]})
    sent: list[list[dict]] = []

    def away(batch):
        raise TransientError("server away")

    with pytest.raises(TransientError):
        r.flush(away, RequestRefused)
    assert len(r.pending) == 1  # kept for the next contact
    r.flush(sent.append, RequestRefused)
    assert [p["run"] for p in sent[0]] == [7] and r.pending == []

    clock.now += 60
    r.tick({"7": ["0"]})

    def refuse(batch):
        raise RequestRefused("bad", 400)

    r.flush(refuse, RequestRefused)
    assert r.pending == []  # a refused batch is not sent again forever
