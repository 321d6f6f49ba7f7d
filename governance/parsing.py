"""One strict reader per kind of value that arrives as text: ids and counts, days, months
and instants.

``str.isdigit`` accepts "²" and "٣" (which ``int`` then refuses, or reads as 3), and digits
enough to overflow a database integer; ``strptime`` and Django's date parsing read any
Unicode digit (Arabic-Indic digits make a date to them) and accept offsets PostgreSQL refuses. Every
id, count, day, month or instant read from a URL, a query string, a page form or a JSON body
goes through the readers here (the form, serializer and filter fields of
``governance/fields.py`` wrap them), so a hostile value is refused with its field named,
never a 500, and one value means the same on every route.

Each reader returns None for anything it does not accept; callers say which field.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, tzinfo
from datetime import timezone as fixed_zone

# PostgreSQL's bigint holds 9,223,372,036,854,775,807: 18 digits always fit.
MAX_DIGITS = 18
_WHOLE = re.compile(r"[0-9]+")


def whole_number(value, *, max_digits: int = MAX_DIGITS) -> int | None:
    """``value`` as an int when it is 1 to ``max_digits`` ASCII digits (or such an int
    already), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 10**max_digits else None
    if not isinstance(value, str) or len(value) > max_digits or not _WHOLE.fullmatch(value):
        return None
    return int(value)


# ASCII digits only, fixed widths: YYYY-MM-DD, optionally a time and an offset.
_DAY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")
_INSTANT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,6}))?)?)?"
    r"(Z|z|[+-][0-9]{2}(?::?[0-9]{2})?)?"
)
# The longest text any of them reads ("2026-12-01T23:59:59.999999+05:30" is 32 characters).
_MAX_TEXT = 40


def _text(value) -> str | None:
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        return None
    return value.strip()


def calendar_day(value) -> date | None:
    """``value`` as a date when it is ``YYYY-MM-DD`` in ASCII digits naming a real day
    (years 1 to 9999), or a ``date`` already; else None."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    text = _text(value)
    match = _DAY.fullmatch(text) if text is not None else None
    if match is None:
        return None
    try:
        return date(*(int(part) for part in match.groups()))
    except ValueError:
        return None


def calendar_month(value) -> date | None:
    """The first day of the month ``value`` names as ``YYYY-MM`` (ASCII digits, years 1 to
    9999), else None."""
    text = _text(value)
    match = _MONTH.fullmatch(text) if text is not None else None
    if match is None:
        return None
    try:
        return date(int(match.group(1)), int(match.group(2)), 1)
    except ValueError:
        return None


def instant(value, *, default_zone: tzinfo = UTC) -> datetime | None:
    """``value`` as an aware datetime in UTC, else None.

    ISO 8601 in ASCII digits: a day, optionally a time (``T`` or a space, seconds and up to
    six decimals optional) and an offset (``Z``, ``+05:30``, ``+0530`` or ``+05``, under 24
    hours). Without an offset the time is in ``default_zone``; a day alone is its midnight.
    An aware ``datetime`` passes through (converted to UTC). Anything that cannot be
    expressed in UTC between years 1 and 9999 is None, so the database never sees it.
    """
    if isinstance(value, datetime):
        parsed = value
    else:
        text = _text(value)
        match = _INSTANT.fullmatch(text) if text is not None else None
        if match is None:
            return None
        year, month, day, hour, minute, second, fraction, offset = match.groups()
        try:
            parsed = datetime(
                int(year),
                int(month),
                int(day),
                int(hour or 0),
                int(minute or 0),
                int(second or 0),
                int((fraction or "0").ljust(6, "0")),
            )
        except ValueError:
            return None
        zone = _offset(offset) if offset else default_zone
        if zone is None:
            return None
        parsed = parsed.replace(tzinfo=zone)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=default_zone)
    try:
        return parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def _offset(text: str) -> tzinfo | None:
    """A UTC offset from ``Z``, ``±HH``, ``±HHMM`` or ``±HH:MM``; None when 24 hours or more
    or minutes past 59."""
    if text in ("Z", "z"):
        return UTC
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 23 or minutes > 59:
        return None
    delta = timedelta(hours=hours, minutes=minutes)
    return fixed_zone(-delta if text[0] == "-" else delta)


NODE_KINDS = ("organization", "program", "project")


def node_ref(value) -> tuple[str, int] | None:
    """A node named as in URLs and the API, ``"program-12"``, as ``("program", 12)``; None for
    anything else (an unknown kind, a number that is not a plain whole number)."""
    if not isinstance(value, str):
        return None
    kind, _, number = value.partition("-")
    pk = whole_number(number)
    return (kind, pk) if kind in NODE_KINDS and pk is not None else None
