"""Celery tasks of the live loop: thin wrappers that take ids and call one service.

All are idempotent, acknowledged late (a killed worker's task is redelivered), time-limited,
and retried a bounded number of times when the database or the broker drops the connection.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError

from scheduler.executors.tasks import simulated_executor_tick  # noqa: F401 - registers it

logger = logging.getLogger(__name__)

RETRY = {
    "acks_late": True,
    "autoretry_for": (OperationalError, InterfaceError, ConnectionError),
    "max_retries": 5,
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
}


def _close_broken_connection() -> None:
    """Drop a database connection the server closed (e.g. PostgreSQL restarted)."""
    from django.db import connection

    if connection.connection is not None and not connection.is_usable():
        connection.close()


@shared_task(soft_time_limit=50, time_limit=60, **RETRY)
def scheduler_cycle(cluster_id: int) -> int | None:
    """Run one scheduling cycle for a cluster (skips when another worker is running one)."""
    from scheduler.services.cycle import scheduling_cycle_run
    from scheduler.services.cycle_queue import cycle_queued_clear

    # First, before any state is read: changes committed from now on must enqueue a new
    # cycle, since this one may not see them (enqueues are coalesced while one is queued).
    cycle_queued_clear(cluster_id=cluster_id)
    _close_broken_connection()
    record = scheduling_cycle_run(cluster_id=cluster_id)
    return record.pk if record else None


@shared_task(soft_time_limit=20, time_limit=30, **RETRY)
def scheduler_cycle_all() -> int:
    """Beat entry: enqueue a cycle for every cluster that has nodes."""
    from scheduler.models import Node

    _close_broken_connection()
    cluster_ids = sorted(set(Node.objects.values_list("cluster_id", flat=True)))
    for cluster_id in cluster_ids:
        scheduler_cycle.delay(cluster_id)
    return len(cluster_ids)


@shared_task(soft_time_limit=100, time_limit=120, **RETRY)
def usage_account() -> int:
    """Close the usage ledger of every running run up to now and roll it up."""
    from governance.models import Cluster
    from scheduler.models import Node
    from scheduler.services.usage import usage_account as account

    _close_broken_connection()
    written = 0
    for cluster in Cluster.objects.filter(
        id__in=Node.objects.values("cluster_id").distinct()
    ).order_by("id"):
        written += account(cluster=cluster)
    return written


@shared_task(soft_time_limit=50, time_limit=60, **RETRY)
def nodes_expire_heartbeats() -> int:
    """Mark down nodes whose agents went silent; requeue their workloads."""
    from scheduler.services.nodes import nodes_expire_heartbeats as expire

    _close_broken_connection()
    return len(expire())


@shared_task(soft_time_limit=1800, time_limit=1900, acks_late=True)
def simulation_run(job_id: int) -> str | None:
    """Run a simulation job from the simulator page (a no-op unless it is still queued)."""
    from scheduler.services.simulations import simulation_job_run

    _close_broken_connection()
    job = simulation_job_run(job_id=job_id)
    return job.state if job else None


@shared_task(soft_time_limit=1800, time_limit=1900, acks_late=True)
def whatif_run(job_id: int) -> str | None:
    """Run a what-if asked for before a budget change (a no-op unless it is still queued)."""
    from scheduler.services.whatif import whatif_run as run

    _close_broken_connection()
    job = run(job_id=job_id)
    return job.state if job else None


@shared_task(soft_time_limit=280, time_limit=300, **RETRY)
def slurm_sync(connection_id: int) -> str:
    """Reconcile one Slurm connection's tree into Slurm (a no-op when it is disabled)."""
    from scheduler.adapters.slurm.client import SlurmError
    from scheduler.adapters.slurm.names import SlurmNameError
    from scheduler.adapters.slurm.sync import slurm_sync as sync
    from scheduler.models import SlurmConnection

    _close_broken_connection()
    connection = SlurmConnection.objects.filter(pk=connection_id, enabled=True).first()
    if connection is None:
        return "disabled"
    try:
        report = sync(connection=connection)
    except (SlurmError, SlurmNameError) as exc:
        # Nothing was changed; the next beat tries again. Kept where operators look.
        SlurmConnection.objects.filter(pk=connection_id).update(last_sync_summary=f"ERROR: {exc}")
        logger.warning("slurm_sync %s: %s", connection.slurm_cluster, exc)
        return "error"
    return "ok" if report.ok else "stopped"


@shared_task(soft_time_limit=280, time_limit=300, **RETRY)
def slurm_import_usage(connection_id: int) -> str:
    """Charge one Slurm connection's jobs since its last import (a no-op when disabled)."""
    from scheduler.adapters.slurm.client import SlurmError
    from scheduler.adapters.slurm.usage import slurm_usage_import
    from scheduler.models import SlurmConnection

    _close_broken_connection()
    connection = SlurmConnection.objects.filter(pk=connection_id, enabled=True).first()
    if connection is None:
        return "disabled"
    try:
        slurm_usage_import(connection=connection)
    except (SlurmError, ValueError) as exc:
        SlurmConnection.objects.filter(pk=connection_id).update(last_import_summary=f"ERROR: {exc}")
        logger.warning("slurm_import_usage %s: %s", connection.slurm_cluster, exc)
        return "error"
    return "ok"


@shared_task(soft_time_limit=20, time_limit=30, **RETRY)
def slurm_sync_all() -> int:
    """Beat entry: enqueue a sync for every enabled Slurm connection (none: nothing)."""
    from scheduler.models import SlurmConnection

    _close_broken_connection()
    ids = list(SlurmConnection.objects.filter(enabled=True).values_list("id", flat=True))
    for connection_id in ids:
        slurm_sync.delay(connection_id)
    return len(ids)


@shared_task(soft_time_limit=20, time_limit=30, **RETRY)
def slurm_import_usage_all() -> int:
    """Beat entry: enqueue a usage import for every enabled Slurm connection."""
    from scheduler.models import SlurmConnection

    _close_broken_connection()
    ids = list(SlurmConnection.objects.filter(enabled=True).values_list("id", flat=True))
    for connection_id in ids:
        slurm_import_usage.delay(connection_id)
    return len(ids)


@shared_task(acks_late=True)
def delivery_alerts_check() -> int:
    """Tell teams that got less than they were owed in the last 24 hours (at most once a day
    each) and teams whose month passed a share of its entitlement (once per threshold and
    month); returns how many were found. Run by beat every hour."""
    from scheduler.services.delivery_alerts import delivery_alerts_check, month_usage_check

    return delivery_alerts_check() + month_usage_check()


@shared_task(soft_time_limit=50, time_limit=60, **RETRY)
def idle_rule_apply_all() -> int:
    """Beat entry: apply the idle-allocation rule on every cluster that has nodes; returns
    how many runs were newly marked idle."""
    from django.utils import timezone

    from governance.models import Cluster
    from scheduler.models import Node
    from scheduler.services.idle_rule import idle_rule_apply

    _close_broken_connection()
    marked = 0
    for cluster in Cluster.objects.filter(
        id__in=Node.objects.values("cluster_id").distinct()
    ).order_by("id"):
        marked += idle_rule_apply(cluster=cluster, now=timezone.now())["marked"]
    return marked
