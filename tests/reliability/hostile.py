"""Values of every class a parser chokes on, shared by the route walk and the API fuzzer:
beyond 64 bits, unicode digits, dates past 9999 and impossible ones, negative, not-a-number,
huge strings, NUL, markup, empty."""

from __future__ import annotations

HOSTILE_TEXT = [
    "99999999999999999999999999",
    "²",
    "٣٤",
    "10000-01-01",
    "99999-12",
    "2026-02-30",
    "-1",
    "NaN",
    "1e400",
    "x" * 3000,
    "\x00",
    "<a href=x>y</a>",
    "",
]
# The same classes as JSON values of other types (bodies are JSON).
HOSTILE_JSON = [*HOSTILE_TEXT, 2**70, -(2**70), 1e308, -1, None, [], {}, [[[[[]]]]], True]
