"""Password guessing on the API is locked out: failed attempts are counted per account and per
client address in the shared cache (Redis when ``CACHE_URL`` is set, so every process and
server counts together), and past a few in a window every attempt, the right password
included, is refused with how long to wait. The sign-in pages have allauth's own limits
(``ACCOUNT_RATE_LIMITS``); these are the API's.
"""

from __future__ import annotations

import hashlib
import time

from django.core.cache import cache

WINDOW_SECONDS = 300
# Failures allowed in a window: per account (guessing one password), per address (trying many
# accounts from one place).
LIMITS = {"account": 5, "address": 10}


def _key(kind: str, value: str) -> str:
    digest = hashlib.sha256(value.encode()).hexdigest()[:32]  # any text makes a valid key
    return f"lockout:{kind}:{digest}"


def lockout_wait(*, account: str, address: str) -> int:
    """Seconds the caller must wait before trying again (0: not locked out)."""
    now = time.time()
    wait = 0
    for kind, value in (("account", account.lower()), ("address", address)):
        count = cache.get(_key(kind, value), 0)
        if count >= LIMITS[kind]:
            ends = cache.get(_key(kind, value) + ":ends", now + WINDOW_SECONDS)
            wait = max(wait, int(ends - now) + 1)
    return wait


def lockout_failure(*, account: str, address: str) -> None:
    """Count one failed attempt against the account and the address."""
    for kind, value in (("account", account.lower()), ("address", address)):
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
