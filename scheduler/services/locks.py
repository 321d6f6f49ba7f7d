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
    do nothing (another worker is at it). With ``wait=True`` it always yields ``True``.
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
    held = lock.acquire(blocking=wait)
    try:
        with transaction.atomic():
            yield held
    finally:
        if held:
            lock.release()
