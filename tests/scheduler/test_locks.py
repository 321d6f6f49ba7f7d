"""The loop's cluster locks are free once their transaction commits, before its on-commit
hooks run, on PostgreSQL and on the quick start's SQLite alike: a hook that looks for work
asked of the holder meanwhile (a cycle's rerun requests) relies on it."""

from __future__ import annotations

import threading

from django.db import connections, transaction

from scheduler.services.locks import CYCLE_LOCK, locked_transaction
from tests.quick_start import quick_start_json

CLUSTER_ID = 424242  # no row is read: the lock is keyed by the number alone


def lock_seen_from_hooks() -> dict[str, bool]:
    """Take the cycle lock, and from an on-commit hook registered under it ask, from another
    thread, whether the lock can be taken; and once more inside the transaction."""
    seen: dict[str, bool] = {}

    def try_from_another_thread(key: str) -> None:
        def attempt() -> None:
            try:
                with locked_transaction(CYCLE_LOCK, CLUSTER_ID, wait=False) as held:
                    seen[key] = held
            finally:
                connections.close_all()

        thread = threading.Thread(target=attempt)
        thread.start()
        thread.join(timeout=60)

    with locked_transaction(CYCLE_LOCK, CLUSTER_ID, wait=False) as held:
        seen["holder"] = held
        try_from_another_thread("inside")
        transaction.on_commit(lambda: try_from_another_thread("hook"))
    return seen


def test_on_postgresql_a_hook_finds_the_lock_free(transactional_db):
    assert lock_seen_from_hooks() == {"holder": True, "inside": False, "hook": True}


def test_on_sqlite_a_hook_finds_the_lock_free(tmp_path):
    script = (
        "import json; from tests.scheduler.test_locks import lock_seen_from_hooks; "
        "print(json.dumps(lock_seen_from_hooks()))"
    )
    seen = quick_start_json(tmp_path, script)
    assert seen == {"holder": True, "inside": False, "hook": True}


def test_on_sqlite_a_rolled_back_holder_frees_the_lock(tmp_path):
    script = """
import json, threading
from scheduler.services.locks import CYCLE_LOCK, locked_transaction
try:
    with locked_transaction(CYCLE_LOCK, 7, wait=False) as held:
        raise RuntimeError("the holder fails")
except RuntimeError:
    pass
seen = []
def attempt():
    with locked_transaction(CYCLE_LOCK, 7, wait=False) as held:
        seen.append(held)
thread = threading.Thread(target=attempt)
thread.start()
thread.join(timeout=60)
print(json.dumps(seen))
"""
    assert quick_start_json(tmp_path, script) == [True]
