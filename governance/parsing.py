"""One strict reader per kind of value that arrives as text: ids and counts.

``str.isdigit`` accepts "²" and "٣" (which ``int`` then refuses, or reads as 3), and digits
enough to overflow a database integer; every id or count read from a URL, a query string or
a JSON body goes through ``whole_number`` instead, so a hostile value is refused (a 400 or a
404 naming it), never a 500.
"""

from __future__ import annotations

import re

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
