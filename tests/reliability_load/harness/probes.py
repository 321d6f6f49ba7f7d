"""Signs of health read straight from the run's database and web server: a scheduling cycle
ran, an order was acknowledged, a node's state, the sign-in page answers."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

from tests.reliability_load.harness.config import DB_NAME, PG_PORT, RECOVERY_LIMIT
from tests.waiting import wait_until


def db_query(sql: str, params: tuple = ()) -> list[tuple] | None:
    """One query on the harness database; None when it cannot be reached (a fault)."""
    import psycopg

    try:
        with psycopg.connect(
            host="127.0.0.1", port=PG_PORT, user="postgres", dbname=DB_NAME, connect_timeout=2
        ) as conn:
            return conn.execute(sql, params).fetchall()
    except psycopg.Error:
        return None


def seconds_until(
    predicate: Callable[[], object], limit: float = RECOVERY_LIMIT, interval: float = 0.25
) -> float | None:
    """Seconds until ``predicate()`` is truthy, or None after ``limit``."""
    began = time.time()
    if wait_until(predicate, limit, interval):
        return time.time() - began
    return None


def cycle_done_after(cluster_id: int, at: float) -> bool:
    """Has a scheduling cycle of the cluster started after ``at`` (epoch seconds)?"""
    rows = db_query(
        "SELECT count(*) FROM scheduler_schedulingcycle WHERE cluster_id = %s"
        " AND started_at > to_timestamp(%s)",
        (cluster_id, at),
    )
    return bool(rows and rows[0][0])


def order_acknowledged_after(at: float, node: str | None = None) -> bool:
    """Was an order (on ``node``, if given) acknowledged after ``at`` (epoch seconds)?"""
    sql = (
        "SELECT count(*) FROM scheduler_order o JOIN scheduler_node n ON n.id = o.node_id"
        " WHERE o.acknowledged_at > to_timestamp(%s)"
    )
    params: tuple = (at,)
    if node:
        sql += " AND n.name = %s"
        params = (at, node)
    rows = db_query(sql, params)
    return bool(rows and rows[0][0])


def node_state(node: str) -> str | None:
    """The node's state, or None when the database cannot say."""
    rows = db_query("SELECT state FROM scheduler_node WHERE name = %s", (node,))
    return rows[0][0] if rows else None


def healthy_lab_nodes() -> int:
    """How many of the lab cluster's nodes are healthy (0 when the database cannot say)."""
    rows = db_query(
        "SELECT count(*) FROM scheduler_node WHERE name LIKE 'lab-%%' AND state = 'healthy'"
    )
    return (rows or [(0,)])[0][0]


def sign_in_page_answers(port: int) -> bool:
    """Does the web server on ``port`` serve the sign-in page (200)?"""
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/accounts/login/", timeout=2
        ) as response:
            return response.status == 200
    except OSError:
        return False
