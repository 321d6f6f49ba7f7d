"""Writes of shares: a manager's direct split of a node's children."""

from __future__ import annotations


def allocation_split(*, actor, parent, cluster, percents, reason, valid_from=None, valid_to=None):
    """Set the shares of children of ``parent`` on ``cluster`` (actor must manage ``parent``)."""
    raise NotImplementedError
