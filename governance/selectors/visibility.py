"""The one answer to "what may this user see and change" (see docs/governance-services.md)."""

from __future__ import annotations


def user_visibility(*, user):
    """What ``user`` may see and change in the budget tree."""
    raise NotImplementedError
