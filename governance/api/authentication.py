"""Bearer tokens under the address lockout: users' API tokens here, node agents' tokens in
``scheduler/api/authentication.py``, both through ``SecretLockoutMixin``.

A token is a random secret nobody can guess in practice, but a client that sends invalid ones
over and over is either misconfigured or probing; after ``LIMITS["secret-address"]`` invalid
tokens in a window its address gets 429 with ``Retry-After`` (see
``governance.services.lockout``). Requests without a token (sessions, anonymous) are never
affected.
"""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header

from governance.services.lockout import secret_lockout_failure, secret_lockout_wait


class SecretLockoutMixin:
    """Wrap an authentication class that reads ``Authorization: <keyword> <secret>``."""

    keyword = "Token"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None  # not this scheme: nothing to count
        address = request.META.get("REMOTE_ADDR", "")
        wait = secret_lockout_wait(address=address)
        if wait:
            # DRF adds "Expected available in N seconds." and the Retry-After header.
            raise exceptions.Throttled(wait, detail="Too many invalid tokens from this address.")
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            secret_lockout_failure(address=address)
            raise


class LockedTokenAuthentication(SecretLockoutMixin, TokenAuthentication):
    """DRF's user token authentication under the address lockout."""
