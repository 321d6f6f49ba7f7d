"""The queue page's estimate measured on a replay: exact when its assumptions hold."""

from __future__ import annotations

import random

from scheduler.simulator.estimate_error import estimate_errors
from scheduler.simulator.replay import ReplayConfig
from scheduler.simulator.traces import Trace, TraceJob


def test_with_exact_durations_and_no_later_arrivals_the_estimate_is_the_start():
    # One team, everything submitted at once: nothing arrives after a job and the order cannot
    # move, so the forward run must predict the replay's starts to the second.
    rng = random.Random(7)
    jobs = [
        TraceJob(
            id=f"j{i}", submit_time=0.0, duration=float(rng.randint(600, 20_000)),
            gpus=rng.choice([1, 2, 4, 8, 16]), project="team",
        )
        for i in range(60)
    ]  # fmt: skip
    trace = Trace(jobs=jobs, format="canonical", projects=["team"])

    samples, _ = estimate_errors(trace, None, ReplayConfig(gpus=32, record_runs=False), samples=60)

    assert len(samples) > 20  # most waited past the first cycle
    assert all(s.estimate is not None and s.actual is not None for s in samples)
    assert [s.error for s in samples] == [0.0] * len(samples)
    assert {s.gang for s in samples} == {True, False}


def test_work_arriving_later_makes_the_estimate_miss():
    # A second team's jobs arrive an hour in and rank first (it has used nothing): the first
    # team's waiting jobs start later than estimated at their submission.
    first = [
        TraceJob(id=f"a{i}", submit_time=0.0, duration=7200.0, gpus=8, project="a")
        for i in range(8)
    ]
    later = [
        TraceJob(id=f"b{i}", submit_time=3600.0, duration=7200.0, gpus=8, project="b")
        for i in range(4)
    ]
    trace = Trace(jobs=first + later, format="canonical", projects=["a", "b"])

    samples, _ = estimate_errors(trace, None, ReplayConfig(gpus=16, record_runs=False))

    late = [s for s in samples if s.job.startswith("a") and s.actual > s.estimate]
    assert late
