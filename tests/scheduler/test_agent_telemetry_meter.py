"""The node agent's GPU telemetry: per-run GPU-seconds from samples.

No GPU: expected values are worked out by hand for the meter's timeline, and properties
checked over generated timelines.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.agent.telemetry import GpuSample, RunUtilizationMeter


# --- RunUtilizationMeter --------------------------------------------------------------------
def s(index, busy=None, mem=None, power=None):
    return GpuSample(index=index, busy_percent=busy, memory_used_mib=mem, power_watts=power)


def test_meter_hand_worked_timeline():
    meter = RunUtilizationMeter()
    meter.start_run("A", ["0", "1"], now=0.0)
    meter.start_run("C", ["3"], now=0.0)
    # t=0: GPU 2 belongs to no run yet: its reading is not B's.
    meter.add_samples(
        [s("0", 50, 1000, 100.0), s("1", 100, 2000, 200.0), s("2", 80, 500), s("3", None, 700)],
        now=0.0,
    )
    meter.start_run("B", ["2"], now=4.0)
    meter.add_samples(
        [s("0", 0, 1500, 50.0), s("1", None, 1800), s("2", 60, 900, 300.0), s("3", None, 800)],
        now=5.0,
    )
    first = meter.take(now=10.0)
    # A: 2 GPUs x 10 s = 20. GPU 0: 0.5 x 5 + 0 x 5 = 2.5; GPU 1: 1.0 x 5, then no reading.
    a = first["A"]
    assert a.period_seconds == 10.0
    assert a.allocated_gpu_seconds == 20.0
    assert a.busy_gpu_seconds == pytest.approx(7.5)
    assert a.observed_gpu_seconds == 15.0
    assert a.sample_count == 4
    assert a.max_memory_used_mib == 2000
    assert a.mean_power_watts == pytest.approx((100 + 200 + 50) / 3)
    # B: held from t=4: 6 GPU-seconds; its first reading at t=5 (0.6) holds 5 s = 3.0.
    b = first["B"]
    assert (b.period_seconds, b.allocated_gpu_seconds) == (6.0, 6.0)
    assert b.busy_gpu_seconds == pytest.approx(3.0)
    assert b.observed_gpu_seconds == 5.0
    assert (b.sample_count, b.max_memory_used_mib, b.mean_power_watts) == (1, 900, 300.0)
    # C: its GPU never gave a busy reading: no telemetry, not "idle".
    c = first["C"]
    assert c.allocated_gpu_seconds == 10.0
    assert c.busy_gpu_seconds is None
    assert c.observed_gpu_seconds == 0.0
    assert (c.sample_count, c.max_memory_used_mib, c.mean_power_watts) == (2, 800, None)

    meter.add_samples([s("0", 100), s("1", 20), s("2", None)], now=12.0)
    meter.stop_run("B", now=14.0)
    meter.stop_run("C", now=10.0)  # late news: counts as the last time seen (14)
    second = meter.take(now=15.0)
    # A over [10, 15]: GPU 0: 0 x 2 + 1.0 x 3 = 3; GPU 1: none x 2 + 0.2 x 3 = 0.6.
    assert second["A"].allocated_gpu_seconds == 10.0
    assert second["A"].busy_gpu_seconds == pytest.approx(3.6)
    assert second["A"].observed_gpu_seconds == 8.0
    assert second["A"].max_memory_used_mib is None
    # B over [10, 14]: 0.6 (from t=5) x 2 s, then no reading until it stopped.
    assert second["B"].period_seconds == 4.0
    assert second["B"].allocated_gpu_seconds == 4.0
    assert second["B"].busy_gpu_seconds == pytest.approx(1.2)
    assert second["B"].observed_gpu_seconds == 2.0
    assert second["C"].period_seconds == 4.0  # stopped at 14, not 10
    assert second["C"].busy_gpu_seconds is None

    third = meter.take(now=20.0)
    assert set(third) == {"A"}  # stopped runs are reported once, then dropped
    assert third["A"].allocated_gpu_seconds == 10.0
    assert third["A"].busy_gpu_seconds == pytest.approx(6.0)  # 1.0 x 5 + 0.2 x 5
    assert third["A"].sample_count == 0
    assert third["A"].mean_power_watts is None


def test_meter_refuses_a_gpu_held_twice_and_repeats_a_start_harmlessly():
    meter = RunUtilizationMeter()
    meter.start_run("A", ["0"], now=0.0)
    meter.start_run("A", ["0"], now=1.0)
    with pytest.raises(ValueError, match="held by run A"):
        meter.start_run("B", ["0"], now=1.0)
    with pytest.raises(ValueError, match="already holds"):
        meter.start_run("A", ["1"], now=1.0)
    assert meter.take(now=2.0)["A"].allocated_gpu_seconds == 2.0


def test_a_new_run_gets_no_credit_for_its_predecessors_reading():
    meter = RunUtilizationMeter()
    meter.start_run("old", ["0"], now=0.0)
    meter.add_samples([s("0", 100)], now=0.0)
    meter.stop_run("old", now=3.0)
    meter.start_run("new", ["0"], now=3.0)
    got = meter.take(now=5.0)
    assert got["old"].busy_gpu_seconds == pytest.approx(3.0)
    assert got["new"].allocated_gpu_seconds == 2.0
    assert got["new"].busy_gpu_seconds is None


# A timeline: per step, a time increment and what happens then.
EVENTS = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=10, allow_nan=False),
        st.one_of(
            st.tuples(st.just("start"), st.sampled_from("abc"), st.integers(1, 3)),
            st.tuples(st.just("stop"), st.sampled_from("abc"), st.just(0)),
            st.tuples(
                st.just("sample"),
                st.sampled_from(["0", "1", "2", "3", "4"]),
                st.one_of(st.none(), st.integers(0, 100)),
            ),
        ),
    ),
    max_size=40,
)


def play(meter, events, split_at=None):
    """Feed ``events``; with ``split_at``, take once after that many events. Return takes."""
    takes = []
    now = 0.0
    free = ["0", "1", "2", "3", "4"]
    held: dict[str, list[str]] = {}
    for i, (dt, (kind, key, value)) in enumerate(events):
        if i == split_at:
            takes.append(meter.take(now))
        now += dt
        if kind == "start" and key not in held and len(free) >= value:
            held[key], free = free[:value], free[value:]
            meter.start_run(key, held[key], now)
        elif kind == "stop" and key in held:
            free += held.pop(key)
            meter.stop_run(key, now)
        elif kind == "sample":
            meter.add_samples([s(key, value, 100, 5.0)], now)
    if split_at is not None and split_at >= len(events):
        takes.append(meter.take(now))
    takes.append(meter.take(now + 1.0))
    return takes


def totals(takes):
    out: dict[str, list[float]] = {}
    for take in takes:
        for run_id, u in take.items():
            row = out.setdefault(run_id, [0.0, 0.0, 0.0, 0.0, 0])
            row[0] += u.period_seconds
            row[1] += u.allocated_gpu_seconds
            row[2] += u.busy_gpu_seconds or 0.0
            row[3] += u.observed_gpu_seconds
            row[4] += u.sample_count
    return out


@settings(max_examples=200, deadline=None)
@given(events=EVENTS, split=st.integers(0, 45))
def test_meter_properties(events, split):
    whole = play(RunUtilizationMeter(), events)
    parts = play(RunUtilizationMeter(), events, split_at=split)
    for take in whole + parts:
        for u in take.values():
            busy = u.busy_gpu_seconds or 0.0
            assert 0 <= busy <= u.observed_gpu_seconds + 1e-9
            assert u.observed_gpu_seconds <= u.allocated_gpu_seconds + 1e-9
            assert (u.busy_gpu_seconds is None) == (u.observed_gpu_seconds == 0)
    one, two = totals(whole), totals(parts)
    assert one.keys() == two.keys()
    for run_id in one:
        assert two[run_id] == pytest.approx(one[run_id])
