"""Reads of the budget tree: shares as of an instant, effective shares, history."""

from __future__ import annotations


def share_at(*, node, cluster, at):
    """The percent of its parent that ``node`` holds on ``cluster`` at ``at`` (0 when none)."""
    raise NotImplementedError


def tree_for(*, visibility, cluster, at=None):
    """The visible part of the tree of ``cluster``'s organization as of ``at``."""
    raise NotImplementedError


def allocation_history(*, node, cluster=None):
    """Every allocation row of ``node``, newest first."""
    raise NotImplementedError


def children_of(*, parent):
    """The programs of an organization or the projects of a program."""
    raise NotImplementedError
