"""Password guessing on the API is locked out: failed attempts are counted per account and per
client address in the shared cache (Redis when ``CACHE_URL`` is set, so every process and
server counts together), and past a few in a window every attempt, the right password
included, is refused with how long to wait. The sign-in pages have allauth's own limits
(``ACCOUNT_RATE_LIMITS``); these are the API's.

Bearer secrets (users' API tokens, node agents' tokens) belong to no account a guesser could
name, so they are counted per client address only: an address that sends ``secret-address``
invalid ones in a window is refused, a valid token included, until the window passes. The
limit is twice the password one: an agent restarted with a revoked token retries a few times
before its operator notices, and the agents of one address should not lock each other out
for that.
"""

from __future__ import annotations

import hashlib
import time

from django.core.cache import cache

WINDOW_SECONDS = 300
# Failures allowed in a window: per account (guessing one password), per address (trying many
# accounts from one place).
LIMITS = {"account": 5, "address": 10, "secret-address": 20}


def _key(kind: str, value: str) -> str:
    digest = hashlib.sha256(value.encode()).hexdigest()[:32]  # any text makes a valid key
    return f"lockout:{kind}:{digest}"


def lockout_wait(*, account: str, address: str) -> int:
    """Seconds the caller must wait before trying again (0: not locked out)."""
    return _wait((("account", account.lower()), ("address", address)))


def lockout_failure(*, account: str, address: str) -> None:
    """Count one failed attempt against the account and the address."""
    _fail((("account", account.lower()), ("address", address)))


def secret_lockout_wait(*, address: str) -> int:
    """Seconds a client address must wait before presenting a bearer secret again."""
    return _wait((("secret-address", address),))


def secret_lockout_failure(*, address: str) -> None:
    """Count one invalid bearer secret against the client address."""
    _fail((("secret-address", address),))


def _wait(counters) -> int:
    now = time.time()
    wait = 0
    for kind, value in counters:
        count = cache.get(_key(kind, value), 0)
        if count >= LIMITS[kind]:
            ends = cache.get(_key(kind, value) + ":ends", now + WINDOW_SECONDS)
            wait = max(wait, int(ends - now) + 1)
    return wait


def _fail(counters) -> None:
    for kind, value in counters:
        key = _key(kind, value)
        if cache.add(key, 0, WINDOW_SECONDS):
            cache.set(key + ":ends", time.time() + WINDOW_SECONDS, WINDOW_SECONDS)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr: start a new window
            cache.set(key, 1, WINDOW_SECONDS)


def lockout_clear(*, account: str) -> None:
    """A successful sign-in clears the account's failures (not the address's)."""
    key = _key("account", account.lower())
    cache.delete_many([key, key + ":ends"])
