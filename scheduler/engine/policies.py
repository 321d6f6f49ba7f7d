"""Scheduling policies by name (stub: the real orderings land in the next commits)."""

from __future__ import annotations

from dataclasses import dataclass

POLICIES: tuple[str, ...] = ("fairshare", "quota", "partition", "fifo")


@dataclass(frozen=True)
class Policy:
    """A named policy: how pending work is ordered and what it may preempt."""

    name: str


def make_policy(name: str) -> Policy:
    """Return the policy called ``name``; ``ValueError`` naming the known ones otherwise."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(POLICIES)}")
    return Policy(name)
