"""The one copy of a name the engine keys its tables by.

A driver's rows each carry their own copy of a team's name (every trace row, every database
row), and a cycle looks teams up by name many times: interned, equal names are one object and
a lookup matches by identity instead of comparing characters.
"""

from __future__ import annotations

import sys


def interned(name: str) -> str:
    """``name`` as the interpreter's one shared copy. A ``str`` subclass (which ``sys.intern``
    refuses) is first made a plain ``str`` of the same text."""
    return sys.intern(name if type(name) is str else str.__str__(name))
