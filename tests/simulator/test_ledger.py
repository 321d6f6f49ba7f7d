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
