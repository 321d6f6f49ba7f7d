"""The approval state machine: draft → submitted → approved → applied, or rejected/withdrawn."""

from __future__ import annotations


def approval_request_create(
    *, actor, parent, cluster, percents, reason, effective_from=None, effective_to=None, submit=True
):
    """Create (and by default submit) a request to change shares of ``parent``'s children."""
    raise NotImplementedError


def approval_submit(*, actor, approval_request):
    """Submit a draft request (its requester only)."""
    raise NotImplementedError


def approval_approve(*, actor, approval_request, comment=""):
    """Approve a submitted request; applies it now when its effective date has arrived."""
    raise NotImplementedError


def approval_reject(*, actor, approval_request, comment):
    """Reject a submitted request."""
    raise NotImplementedError


def approval_withdraw(*, actor, approval_request, comment=""):
    """Withdraw a draft or submitted request (its requester only)."""
    raise NotImplementedError


def approval_apply(*, approval_request, now=None):
    """Apply an approved request whose effective date has arrived (system step)."""
    raise NotImplementedError


def approvals_apply_due(*, now=None):
    """Apply every approved request whose effective date has arrived; return how many."""
    raise NotImplementedError
