"""The simulated executor's utilization rule: deterministic per workload id, within its
documented levels, and exact enough to report (no database)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from scheduler.executors.simulated_utilization import busy_of
from scheduler.executors.utilization_model import (
    BETWEEN_BURSTS,
    BURST_LEVEL,
    BURST_SHARE,
    BUSY_LEVEL,
    BUSY_VARIATION,
    IDLE_LEVEL,
    IDLE_SHARE,
    SLOT,
    STARTUP_SECONDS,
    Behaviour,
    utilization_profile,
)

ids = st.integers(min_value=1, max_value=2**40)
times = st.floats(min_value=0, max_value=30 * 86400, allow_nan=False)
spans = st.floats(min_value=1, max_value=6 * 3600, allow_nan=False)


def other(workload_id: int):
    """A non-debug workload: 8 GPUs, 10 simulated hours."""
    return utilization_profile(workload_id=workload_id, gpus=8, declared_seconds=36000)


def debug(workload_id: int):
    return utilization_profile(workload_id=workload_id, gpus=1, declared_seconds=1800)


@given(ids, st.integers(min_value=1, max_value=64), st.floats(0, 10 * 86400), times, spans)
def test_the_same_workload_is_as_busy_every_time(workload_id, gpus, declared, t0, span):
    a = utilization_profile(workload_id=workload_id, gpus=gpus, declared_seconds=declared)
    b = utilization_profile(workload_id=workload_id, gpus=gpus, declared_seconds=declared)
    assert a == b
    assert a.busy_seconds(t0, t0 + span) == b.busy_seconds(t0, t0 + span)
    assert 0 <= a.mean(t0, t0 + span) <= 1


@given(ids, times, spans, spans)
def test_adjoining_spans_add_up(workload_id, t0, first, second):
    for profile in (other(workload_id), debug(workload_id)):
        whole = profile.busy_seconds(t0, t0 + first + second)
        parts = profile.busy_seconds(t0, t0 + first) + profile.busy_seconds(
            t0 + first, t0 + first + second
        )
        assert abs(whole - parts) <= 1e-9 * max(1.0, whole)


@given(ids, times, spans, st.integers(min_value=1, max_value=8))
def test_busy_is_never_more_than_allocated(workload_id, t0, span, gpus):
    allocated = gpus * Decimal(str(round(span, 6)))
    for profile in (other(workload_id), debug(workload_id)):
        busy = busy_of(allocated, profile.mean(t0, t0 + span))
        assert 0 <= busy <= allocated
        assert busy == busy.quantize(Decimal("0.000001"))


@given(ids)
def test_small_short_work_is_bursty_and_low_on_average(workload_id):
    profile = debug(workload_id)
    assert profile.behaviour == Behaviour.BURSTY
    low = BURST_SHARE[0] * BURST_LEVEL + (1 - BURST_SHARE[0]) * BETWEEN_BURSTS
    high = BURST_SHARE[1] * BURST_LEVEL + (1 - BURST_SHARE[1]) * BETWEEN_BURSTS
    for slot in range(6):
        mean = profile.mean(slot * SLOT, (slot + 1) * SLOT)
        assert low - 1e-9 <= mean <= high + 1e-9
        # Each slot opens with its burst.
        assert profile.busy_fraction(slot * SLOT) == BURST_LEVEL


@given(ids, times, spans)
def test_other_work_is_either_busy_or_idle_after_its_start_up(workload_id, t0, span):
    profile = other(workload_id)
    if profile.behaviour == Behaviour.BUSY:
        low, high = BUSY_LEVEL[0] - BUSY_VARIATION, BUSY_LEVEL[1] + BUSY_VARIATION
        assert low - 1e-9 <= profile.mean(t0, t0 + span) <= high + 1e-9
    else:
        assert profile.behaviour == Behaviour.IDLE
        assert STARTUP_SECONDS[0] <= profile.startup <= STARTUP_SECONDS[1]
        assert BUSY_LEVEL[0] <= profile.mean(0, profile.startup) <= BUSY_LEVEL[1]
        after = max(t0, profile.startup)
        assert IDLE_LEVEL[0] <= profile.mean(after, after + span) <= IDLE_LEVEL[1]
        # Below the default idle rule's 5 %, with room to spare.
        assert profile.mean(after, after + span) < 0.05


def test_a_fixed_share_of_other_work_goes_idle():
    kinds = [other(workload_id).behaviour for workload_id in range(1, 20_001)]
    share = kinds.count(Behaviour.IDLE) / len(kinds)
    assert abs(share - IDLE_SHARE) < 0.01
    assert set(kinds) == {Behaviour.IDLE, Behaviour.BUSY}


def test_the_kind_depends_on_the_contract_rule_s_debug_class():
    # At most 2 GPUs and at most 1 h of declared work: debug, bursty; otherwise not.
    assert utilization_profile(workload_id=7, gpus=2, declared_seconds=3600).behaviour == (
        Behaviour.BURSTY
    )
    assert utilization_profile(workload_id=7, gpus=3, declared_seconds=3600).behaviour != (
        Behaviour.BURSTY
    )
    assert utilization_profile(workload_id=7, gpus=2, declared_seconds=3601).behaviour != (
        Behaviour.BURSTY
    )
