"""Celery task of the in-server executors: one beat entry drives the simulated clusters.

Registered in the beat schedule as ``scheduler.executors.tasks.simulated_executor_tick``
(see docs/agents.md); ``SIMULATED_EXECUTOR_ENABLED=false`` turns it into a no-op.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

logger = logging.getLogger(__name__)


@shared_task(
    acks_late=True,
    soft_time_limit=50,
    time_limit=60,
    autoretry_for=(OperationalError, InterfaceError, ConnectionError),
    max_retries=3,
    retry_backoff=1,
    retry_backoff_max=10,
    # A tick older than a few periods is stale: the next one does its work.
    expires=30,
)
def simulated_executor_tick() -> dict:
    """Replay due demo jobs, then play the simulated agents, for every simulated cluster."""
    from scheduler.executors.demo import demo_replay_step
    from scheduler.executors.simulated import (
        simulated_clusters,
        simulated_executor_step,
        simulated_nodes_ensure,
    )

    if not getattr(settings, "SIMULATED_EXECUTOR_ENABLED", True):
        return {}
    summary = {}
    for cluster in simulated_clusters():
        submitted = 0
        # Nodes first: the engine refuses workloads larger than the nodes it knows.
        simulated_nodes_ensure(cluster=cluster)
        if getattr(settings, "DEMO_REPLAY_ENABLED", True):
            submitted = demo_replay_step(cluster=cluster)
        step = simulated_executor_step(cluster=cluster)
        summary[cluster.slug] = {
            "submitted": submitted,
            "acknowledged": step.acknowledged,
            "finished": step.finished,
            "utilization_periods": step.utilization_periods,
        }
    return summary
