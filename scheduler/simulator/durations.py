"""Strict parsing of human durations such as ``7d``, ``8h``, ``30m``, ``90s``."""

from __future__ import annotations

import re

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
# One number (integer or decimal) and one unit; nothing else, so "7 days" or "1h30m" is refused
# rather than half-understood.
_PATTERN = re.compile(r"(\d+(?:\.\d+)?)([dhms])")


def parse_duration(text: str) -> float:
    """Return the number of seconds in ``text`` (``7d``, ``8h``, ``30m``, ``90s``, ``1.5h``).

    A bare number is refused: a unit is required so ``--window 7`` cannot silently mean seven
    seconds. Raises ``ValueError`` with a message that quotes the input.
    """
    value = text.strip().lower() if isinstance(text, str) else ""
    match = _PATTERN.fullmatch(value)
    if not match:
        raise ValueError(
            f"{text!r} is not a duration: write a number and one unit, e.g. 7d, 8h, 30m, 90s"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


def format_duration(seconds: float) -> str:
    """Format seconds compactly for tables: ``42s``, ``12m``, ``3.5h``, ``2.1d``."""
    if seconds != seconds:  # NaN: no value to show
        return "—"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
