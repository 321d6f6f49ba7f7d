"""Queue names: valid DNS-1123 labels, deterministic, collisions refused.

A KAI ``Queue`` is a cluster-scoped Kubernetes object, so its name must be a DNS-1123 label
(lowercase letters, digits and ``-``; starts and ends with a letter or digit; at most 63
characters). Our slugs are Django slugs (letters, digits, ``-`` and ``_``, any case), so they
are normalised. Normalising and shortening can map two nodes to one name; ``names_check``
refuses that instead of letting one queue silently overwrite another in ``kubectl apply``.
"""

from __future__ import annotations

import hashlib
import re

MAX_LENGTH = 63
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NOT_ALLOWED = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")
# Long names keep a readable head and end with a hash of the full path, so two long names
# that share their first 54 characters still differ.
_HASH_LENGTH = 8


class QueueNameError(ValueError):
    """A name cannot be made (empty after normalising) or two nodes got the same name."""


def label_part(text: str) -> str:
    """``text`` lowercased, ``_`` and other characters turned into ``-``, dashes collapsed."""
    part = _NOT_ALLOWED.sub("-", text.lower())
    return _DASHES.sub("-", part).strip("-")


def queue_name(parts: tuple[str, ...]) -> str:
    """The DNS-1123 label for a path of slugs, e.g. ``("h100", "vision", "6214e9")``.

    Parts are normalised with ``label_part`` and joined with ``-``. A name longer than 63
    characters is cut to 54 and ends with ``-`` plus 8 hex digits of the SHA-256 of the
    original parts (deterministic, stable across runs and machines).
    """
    cleaned = [label_part(p) for p in parts]
    if any(not p for p in cleaned):
        raise QueueNameError(f"cannot make a queue name from {'/'.join(parts)!r}")
    name = "-".join(cleaned)
    if len(name) > MAX_LENGTH:
        digest = hashlib.sha256("/".join(parts).encode()).hexdigest()[:_HASH_LENGTH]
        head = name[: MAX_LENGTH - _HASH_LENGTH - 1].rstrip("-")
        name = f"{head}-{digest}"
    if not DNS_LABEL.match(name):  # pragma: no cover - the steps above guarantee it
        raise QueueNameError(f"{name!r} is not a DNS-1123 label")
    return name


def names_check(named: list[tuple[str, str]]) -> None:
    """Refuse two nodes with one queue name. ``named`` holds ``(queue name, node path)``."""
    seen: dict[str, str] = {}
    for name, path in named:
        other = seen.get(name)
        if other is not None:
            raise QueueNameError(
                f"queue name {name!r} would be used by both {other!r} and {path!r}; "
                "rename one of their slugs (or pass another --prefix)"
            )
        seen[name] = path
