"""Hourly buckets and the sliding usage window."""

import pytest

from scheduler.simulator.ledger import UsageLedger

T0 = 1483228800.0  # an hour boundary


def test_rates_are_integrated_into_hourly_buckets():
    ledger = UsageLedger(["a"], T0 + 600, window_seconds=7 * 86400)
    assert ledger.hour0 == T0  # buckets align to whole hours
    ledger.advance(T0 + 1800)
    ledger.change("a", T0 + 1800, charged=4, demand=6)
    ledger.advance(T0 + 5400)
    ledger.change("a", T0 + 5400, charged=-4, free=2)
    ledger.close(T0 + 7200)
    # Closing on a boundary opens an empty third bucket.
    assert ledger.charged[0] == [4 * 1800, 4 * 1800, 0]
    assert ledger.free[0] == [0, 2 * 1800, 0]
    assert ledger.demand[0] == [6 * 1800, 6 * 3600, 0]
    assert ledger.hours == 3


def test_usage_covers_the_window_and_forgets_older_hours():
    ledger = UsageLedger(["a", "b"], T0, window_seconds=2 * 3600)
    ledger.change("a", T0, charged=2)
    ledger.advance(T0 + 1800)
    assert ledger.usage(T0 + 1800) == {"a": 3600.0, "b": 0.0}
    ledger.advance(T0 + 3 * 3600 + 900)
    # Window of 2 h at hour granularity: the previous full hour and the current partial one.
    assert ledger.usage(T0 + 3 * 3600 + 900)["a"] == pytest.approx(2 * (3600 + 900))
    ledger.change("a", T0 + 3 * 3600 + 900, charged=-2)
    ledger.advance(T0 + 10 * 3600)
    assert ledger.usage(T0 + 10 * 3600)["a"] == 0.0


def test_a_prior_window_counts_until_its_hours_leave_it():
    # A 3-hour window: the current hour and the two before. Before the origin, "a" used
    # 100, 200 and 300 GPU-seconds in its last three hours (only the last two are within
    # reach) and "c", which has no job, 50 in the last one.
    ledger = UsageLedger(
        ["a", "b"], T0, window_seconds=3 * 3600, prior={"a": [100, 200, 300], "c": [50]}
    )
    assert ledger.projects == ["a", "b", "c"]
    assert ledger.usage(T0) == {"a": 500.0, "b": 0.0, "c": 50.0}
    ledger.change("b", T0, charged=1)
    ledger.advance(T0 + 3600)  # hour -2 (200) leaves
    assert ledger.usage(T0 + 3600) == {"a": 300.0, "b": 3600.0, "c": 50.0}
    ledger.advance(T0 + 2 * 3600 + 60)  # hour -1 (300, 50) leaves
    assert ledger.usage(T0 + 2 * 3600 + 60) == {"a": 0.0, "b": 2 * 3600.0 + 60, "c": 0.0}
    ledger.advance(T0 + 3 * 3600)  # hour 0 leaves; hour 3 has just begun
    assert ledger.usage(T0 + 3 * 3600) == {"a": 0.0, "b": 2 * 3600.0, "c": 0.0}


def test_without_a_prior_window_nothing_changes():
    plain = UsageLedger(["a"], T0, window_seconds=2 * 3600)
    empty = UsageLedger(["a"], T0, window_seconds=2 * 3600, prior={})
    for ledger in (plain, empty):
        ledger.change("a", T0, charged=3)
        ledger.advance(T0 + 5 * 3600)
    # Hour 4 in full and hour 5, just begun.
    assert plain.usage(T0 + 5 * 3600) == empty.usage(T0 + 5 * 3600) == {"a": 3 * 3600.0}
