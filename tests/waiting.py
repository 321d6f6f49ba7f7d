"""Waiting on a condition another process brings about: poll it until it holds or time is up.

Tests never sleep a fixed time hoping the work is done meanwhile; they poll what they wait
for, with a deadline, through this one helper.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.2,
    *,
    stop_if: Callable[[], bool] | None = None,
) -> T | None:
    """Poll ``predicate`` every ``interval`` seconds until it returns a truthy value, and
    return that value; after ``timeout`` seconds, its last (falsy) value.

    ``stop_if`` ends the wait early (a process that should bring the condition about has
    died): the last value seen is returned, None when ``predicate`` was never called.
    """
    deadline = time.monotonic() + timeout
    value: T | None = None
    while not (stop_if and stop_if()):
        value = predicate()
        if value or time.monotonic() >= deadline:
            break
        time.sleep(interval)
    return value
