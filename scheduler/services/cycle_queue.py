"""Coalescing of enqueued scheduling cycles: at most one queued (not yet started) per cluster.

Every submit, cancel, run end and node change asks for a cycle. Under load that is several a
second, and most of those cycles find nothing the previous one did not already see. So with a
real broker a per-cluster flag in Redis (``SET NX`` with a TTL) marks "a cycle is queued": an
enqueue sends the task only when it set the flag, and the ``scheduler_cycle`` task deletes the
flag when it *starts*, before it reads any state. Whatever commits after that read finds the
flag gone and enqueues the next cycle, so no change waits for more than one queued cycle.

A queued cycle that starts while another still holds the cycle lock skips
(``scheduling_cycle_run``). It cannot know whether the holder read its change, so it leaves a
*rerun request* for the cluster and tries the lock once more (the holder may have finished in
between). The holder clears the request when it takes the lock, before it reads, and looks for
it again once it has committed: a request found then was made during its cycle, so it sends the
next cycle (``cycle_rerun_if_requested``). A change made during a cycle is therefore read by the
next cycle, not by the beat's one up to ``SCHEDULER_CYCLE_SECONDS`` later.

The TTL (``SCHEDULER_CYCLE_QUEUED_TTL_SECONDS``) bounds the harm of a queued task that is lost
(its flag would otherwise block enqueues for ever); the beat's periodic cycle, which does not
use the flag, still runs every ``SCHEDULER_CYCLE_SECONDS`` and clears it too. When Redis cannot
be reached for the flag, the task is sent anyway: a duplicate cycle is harmless, a missing one
is not. In eager mode (no broker, the quick start) nothing is coalesced.
"""

from __future__ import annotations

import logging
import threading

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

# A flag operation must never hold up a commit's on-commit hooks or a cycle for long.
_SOCKET_TIMEOUT_SECONDS = 0.5
_clients: dict[str, redis.Redis] = {}
# Rerun requests without a broker (eager tasks, one process): the cycle lock is then either
# this process's own lock or, on PostgreSQL, shared only with this process's threads.
_local_reruns: set[int] = set()
_local_reruns_guard = threading.Lock()
# In eager mode a rerun runs inline, in the thread that committed; one at a time per thread,
# so a request thread is never held by a chain of reruns (a request made during the inline
# rerun stays for the next cycle, which clears it when it starts).
_inline = threading.local()


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


def _queue_client() -> redis.Redis | None:
    """The Redis that holds the queued flags and rerun requests: the broker's, unless tasks
    run eagerly (no broker: nothing is queued, and rerun requests live in this process)."""
    from governance.celery import app

    return None if app.conf.task_always_eager else _client()


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
    from scheduler.tasks import scheduler_cycle

    client = _queue_client()
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


def cycle_rerun_key(cluster_id: int) -> str:
    """The rerun request's key, per task queue like the queued flag's."""
    from governance.celery import app

    return f"scheduler:cycle-rerun:{app.conf.task_default_queue}:{cluster_id}"


def cycle_rerun_request(*, cluster_id: int) -> None:
    """Ask the cycle that holds the cluster's lock to send one more cycle once it commits.

    A skipped cycle calls this. With Redis away the request is lost and the beat's next
    cycle reads the change instead (logged).
    """
    client = _queue_client()
    if client is None:
        with _local_reruns_guard:
            _local_reruns.add(cluster_id)
        return
    try:
        ttl = settings.SCHEDULER_CYCLE_QUEUED_TTL_SECONDS
        client.set(cycle_rerun_key(cluster_id), 1, ex=ttl)
    except redis.RedisError as exc:
        logger.warning("rerun request for cluster %s not stored (%s)", cluster_id, exc)


def _rerun_take(cluster_id: int, *, keep: bool) -> bool:
    """Whether a rerun is requested for the cluster; the request is removed unless ``keep``."""
    client = _queue_client()
    if client is None:
        with _local_reruns_guard:
            requested = cluster_id in _local_reruns
            if not keep:
                _local_reruns.discard(cluster_id)
        return requested
    key = cycle_rerun_key(cluster_id)
    try:
        return bool(client.exists(key) if keep else client.getdel(key))
    except redis.RedisError as exc:
        logger.warning("rerun request for cluster %s unreadable (%s)", cluster_id, exc)
        return False


def cycle_rerun_requested(*, cluster_id: int) -> bool:
    """Whether a skipped cycle has asked for a rerun that no cycle has served yet."""
    return _rerun_take(cluster_id, keep=True)


def cycle_rerun_clear(*, cluster_id: int) -> None:
    """Drop the cluster's rerun request: a cycle that has taken the lock and not yet read
    any state calls this, since it will read every change the request stands for."""
    _rerun_take(cluster_id, keep=False)


def cycle_rerun_if_requested(*, cluster_id: int) -> bool:
    """After a cycle has committed: send the next cycle when one skipped meanwhile.

    Returns whether a cycle was asked for. In eager mode the rerun runs here, inline, at
    most one at a time per thread (see ``_inline``).
    """
    if getattr(_inline, "active", False):
        return False
    if not _rerun_take(cluster_id, keep=False):
        return False
    _inline.active = True
    try:
        cycle_send(cluster_id=cluster_id)
    finally:
        _inline.active = False
    return True
