"""Coalescing of enqueued scheduling cycles: at most one queued (not yet started) per cluster.

Every submit, cancel, run end and node change asks for a cycle. Under load that is several a
second, and most of those cycles find nothing the previous one did not already see. So with a
real broker a per-cluster flag in Redis (``SET NX`` with a TTL) marks "a cycle is queued": an
enqueue sends the task only when it set the flag, and the ``scheduler_cycle`` task deletes the
flag when it *starts*, before it reads any state. Whatever commits after that read finds the
flag gone and enqueues the next cycle, so no change waits for more than one queued cycle,
unless that cycle starts while another still holds the cycle lock: it then skips
(``scheduling_cycle_run``), and the change waits for the next enqueue or the beat's cycle.

The TTL (``SCHEDULER_CYCLE_QUEUED_TTL_SECONDS``) bounds the harm of a queued task that is lost
(its flag would otherwise block enqueues for ever); the beat's periodic cycle, which does not
use the flag, still runs every ``SCHEDULER_CYCLE_SECONDS`` and clears it too. When Redis cannot
be reached for the flag, the task is sent anyway: a duplicate cycle is harmless, a missing one
is not. In eager mode (no broker, the quick start) nothing is coalesced.
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

# A flag operation must never hold up a commit's on-commit hooks or a cycle for long.
_SOCKET_TIMEOUT_SECONDS = 0.5
_clients: dict[str, redis.Redis] = {}


def _client() -> redis.Redis | None:
    """A Redis client on the broker's URL (one pool per URL), or None when it is not Redis."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    client = _clients.get(url)
    if client is None:
        client = redis.Redis.from_url(
            url,
            socket_connect_timeout=_SOCKET_TIMEOUT_SECONDS,
            socket_timeout=_SOCKET_TIMEOUT_SECONDS,
        )
        _clients[url] = client
    return client


def cycle_queued_key(cluster_id: int) -> str:
    """The flag's key. It names the task queue too: a cycle queued for one set of workers
    (e.g. another test session's private queue on a shared Redis) says nothing about another's.
    """
    from governance.celery import app

    return f"scheduler:cycle-queued:{app.conf.task_default_queue}:{cluster_id}"


def cycle_send(*, cluster_id: int) -> bool:
    """Send a ``scheduler_cycle`` task for the cluster unless one is already queued.

    Returns whether a task was sent. Called after commit (``cycle_enqueue``).
    """
    from governance.celery import app
    from scheduler.tasks import scheduler_cycle

    client = None if app.conf.task_always_eager else _client()
    if client is not None:
        ttl = settings.SCHEDULER_CYCLE_QUEUED_TTL_SECONDS
        try:
            if not client.set(cycle_queued_key(cluster_id), 1, nx=True, ex=ttl):
                return False  # a queued cycle will read this commit's changes
        except redis.RedisError as exc:
            # Never lose a cycle for want of the flag: send it (a spare cycle is harmless).
            logger.warning("cycle flag for cluster %s unavailable (%s); sending", cluster_id, exc)
    scheduler_cycle.delay(cluster_id)
    return True


def cycle_queued_clear(*, cluster_id: int) -> None:
    """Mark the cluster's queued cycle as started: the next enqueue sends a new one.

    The ``scheduler_cycle`` task calls this first, before it reads any state. With Redis away
    the flag stays until its TTL; the cycle runs regardless.
    """
    client = _client()
    if client is None:
        return
    try:
        client.delete(cycle_queued_key(cluster_id))
    except redis.RedisError as exc:
        logger.warning("cycle flag for cluster %s not cleared (%s)", cluster_id, exc)
