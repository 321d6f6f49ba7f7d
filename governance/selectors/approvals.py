"""Reads of approval requests: a decider's inbox and a requester's own requests."""

from __future__ import annotations


def approval_inbox(*, user):
    """Submitted requests waiting for ``user`` to decide."""
    raise NotImplementedError


def approval_requests_by(*, user):
    """The requests ``user`` made."""
    raise NotImplementedError
