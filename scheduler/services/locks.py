"""Cluster-wide locks that serialize the loop's writers across every worker process.

On PostgreSQL these are transaction-scoped advisory locks (released at commit or rollback,
and by the server when a killed worker's connection drops). On SQLite — the quick start, one
process — a process-local re-entrant lock is enough.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

# First key of the two-int advisory lock: which loop activity; the second is the cluster id.
CYCLE_LOCK = 7301
ACCOUNTING_LOCK = 7302

_local_locks: defaultdict[tuple[int, int], threading.RLock] = defaultdict(threading.RLock)
_local_guard = threading.Lock()


@contextmanager
def locked_transaction(kind: int, cluster_id: int, *, wait: bool) -> Iterator[bool]:
    """Open (or join) a transaction holding the ``kind`` lock of ``cluster_id``.

    Yields whether the lock is held: with ``wait=False`` a caller that gets ``False`` must
    do nothing (another worker is at it; on SQLite it is given no transaction). With
    ``wait=True`` it always yields ``True``. The lock is free again once the transaction
    commits, before the on-commit hooks registered inside it run.
    Any transaction that ends runs takes ``ACCOUNTING_LOCK`` *before* it locks run rows, so
    accounting and run ends cannot deadlock.
    """
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cursor:
                if wait:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [kind, cluster_id])
                    held = True
                else:
                    cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [kind, cluster_id])
                    held = bool(cursor.fetchone()[0])
            yield held
        return
    with _local_guard:
        lock = _local_locks[(kind, cluster_id)]
    if not lock.acquire(blocking=wait):
        # The caller does nothing; a transaction would only queue it behind the holder's
        # write lock (SQLite takes it when a transaction begins) for as long as the holder runs.
        yield False
        return
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            lock.release()

    try:
        with transaction.atomic():
            # Released at commit, before any on-commit hook registered inside runs, as
            # PostgreSQL releases its lock at commit: a hook that looks for work asked of the
            # holder meanwhile (a cycle's rerun requests) must see a caller that found the
            # lock held and asked, or that caller's retry must find the lock free.
            transaction.on_commit(release)
            yield True
    finally:
        # A rollback, or a block joined to an outer transaction that has not committed yet.
        release()
