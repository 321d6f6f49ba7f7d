"""The load harness counts a request against a fault when it was in flight during it."""

from __future__ import annotations

from tests.reliability_load.harness import in_window

FAULT_START, FAULT_END = 1000.0, 1003.0


def test_a_request_in_flight_when_the_fault_began_is_in_its_window():
    # Began 3 ms before PostgreSQL went down and was answered 503 30 ms later: a fault
    # error, not a steady-state one (a `make faults` run once failed on exactly this).
    assert in_window(FAULT_START - 0.003, 30.0, FAULT_START, FAULT_END)


def test_requests_wholly_before_or_after_the_fault_are_not():
    assert not in_window(FAULT_START - 1.0, 500.0, FAULT_START, FAULT_END)
    assert not in_window(FAULT_END + 0.001, 5.0, FAULT_START, FAULT_END)


def test_requests_begun_inside_the_fault_are():
    assert in_window(FAULT_START, 1.0, FAULT_START, FAULT_END)
    assert in_window(FAULT_END, 1.0, FAULT_START, FAULT_END)
