"""The simulated executor: node agents for demo clusters, in accelerated time.

For every cluster listed in ``SIMULATED_EXECUTOR_CLUSTERS`` (``"<organization slug>/<cluster
slug>"``) it keeps one simulated node per node of the cluster (``sim-<cluster>-NN``, with the
cluster's GPUs per node), registered through the same services as a real agent, and at each
step:

1. heartbeats those nodes (so heartbeat expiry treats them like real ones);
2. fetches and acknowledges their orders — a start "launches" at once, a stop ends at once;
3. reports ``succeeded`` for every run whose work is done: a workload's
   ``declared_duration_seconds`` is how long its work takes, played
   ``SIMULATED_EXECUTOR_SPEEDUP`` times faster (1 by default: the demo runs on one clock, so
   every duration, protection end and estimated start a page shows is wall time; a higher
   speed-up is for load tests). A resumable workload keeps the work its earlier runs did; a
   non-resumable one starts over.
   A workload without a declared duration runs ``SIMULATED_EXECUTOR_DEFAULT_DURATION_SECONDS``;
4. reports the GPU utilization of the runs on those nodes, as a real agent does every minute,
   by the deterministic rule of ``utilization_model.py`` (``simulated_utilization.py``).

Settings are read at call time; the step is idempotent (services are), so two overlapping
steps cannot double-report anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from governance.models import Cluster
from scheduler.choices import (
    OPEN_ORDER_STATES,
    ExitOutcome,
    NodeState,
    NodeStateSource,
    OrderKind,
)
from scheduler.executors.simulated_utilization import simulated_executor_report
from scheduler.models import Node, NodeAgent, Order, Run
from scheduler.services.executor_reports import (
    node_agent_create,
    node_heartbeat,
    node_register,
    order_acknowledge,
    orders_deliver,
    run_report_exit,
)

logger = logging.getLogger(__name__)

NODE_PREFIX = "sim-"


def speedup() -> float:
    """How many times faster than real time declared durations are played (≥ 1)."""
    return max(1.0, float(getattr(settings, "SIMULATED_EXECUTOR_SPEEDUP", 1)))


def default_duration() -> float:
    """Simulated seconds of work for a workload that declares no duration."""
    return float(getattr(settings, "SIMULATED_EXECUTOR_DEFAULT_DURATION_SECONDS", 3600))


def simulated_clusters() -> list[Cluster]:
    """The clusters named by ``SIMULATED_EXECUTOR_CLUSTERS`` that exist."""
    clusters = []
    for ref in getattr(settings, "SIMULATED_EXECUTOR_CLUSTERS", ["philly/h100"]):
        org_slug, _, cluster_slug = ref.partition("/")
        cluster = Cluster.objects.filter(organization__slug=org_slug, slug=cluster_slug).first()
        if cluster is not None:
            clusters.append(cluster)
    return clusters


def node_name(cluster: Cluster, index: int) -> str:
    """``sim-h100-07``: simulated nodes say so in their name."""
    return f"{NODE_PREFIX}{cluster.slug}-{index:02d}"


def simulated_nodes_ensure(*, cluster: Cluster, now: datetime | None = None) -> list[Node]:
    """Create (once) the simulated nodes of ``cluster``: agent credentials nobody holds, and
    a registration with the cluster's GPUs per node. Returns the cluster's simulated nodes."""
    existing = set(
        NodeAgent.objects.filter(cluster=cluster, name__startswith=NODE_PREFIX).values_list(
            "name", flat=True
        )
    )
    for index in range(1, cluster.nodes + 1):
        name = node_name(cluster, index)
        if name not in existing:
            agent, _ = node_agent_create(cluster=cluster, name=name)
            node_register(agent=agent, gpus=cluster.gpus_per_node, now=now)
    return list(Node.objects.filter(cluster=cluster, name__startswith=NODE_PREFIX))


@dataclass
class StepReport:
    """What one step did, for logs and tests."""

    acknowledged: int = 0
    finished: int = 0
    utilization_periods: int = 0


def simulated_executor_step(*, cluster: Cluster, now: datetime | None = None) -> StepReport:
    """One step of the simulated agents of ``cluster`` (see the module docstring)."""
    now = now or timezone.now()
    report = StepReport()
    nodes = simulated_nodes_ensure(cluster=cluster, now=now)
    node_ids = [n.pk for n in nodes]
    _heartbeat(nodes, now)

    ended: list[int] = []
    with_orders = set(
        Order.objects.filter(node_id__in=node_ids, state__in=OPEN_ORDER_STATES).values_list(
            "node_id", flat=True
        )
    )
    for node in nodes:
        if node.pk not in with_orders:
            continue
        for order in orders_deliver(node=node, now=now):
            # A start "launches" at once and a stop ends the process at once.
            order_acknowledge(order=order, now=now)
            report.acknowledged += 1
            if order.kind == OrderKind.STOP:
                ended.append(order.run_id)

    factor = speedup()
    runs = (
        Run.objects.filter(
            cluster=cluster,
            ended_at__isnull=True,
            stop_requested_at__isnull=True,
            run_nodes__node_id__in=node_ids,
        )
        .exclude(orders__kind=OrderKind.START, orders__state__in=OPEN_ORDER_STATES)
        .select_related("workload")
        .distinct()
    )
    for run in runs:
        if now >= finish_time(run, factor):
            run_report_exit(run=run, outcome=ExitOutcome.SUCCEEDED, exit_code=0, now=now)
            report.finished += 1
            ended.append(run.pk)
    # Last: the runs this step ended get their final period, as an agent sends it after exit.
    report.utilization_periods = simulated_executor_report(
        cluster=cluster,
        nodes=nodes,
        now=now,
        factor=factor,
        default_seconds=default_duration(),
        ended=ended,
    )
    return report


def finish_time(run: Run, factor: float) -> datetime:
    """When ``run`` finishes in wall time: the work left (simulated) divided by the speed-up."""
    workload = run.workload
    work = float(workload.declared_duration_seconds or default_duration())
    if workload.resumable:
        earlier = Run.objects.filter(
            workload=workload, attempt__lt=run.attempt, ended_at__isnull=False
        ).values_list("started_at", "ended_at")
        done = sum((end - start).total_seconds() for start, end in earlier) * factor
        work = max(0.0, work - done)
    return run.started_at + timedelta(seconds=work / factor)


def simulated_nodes_wake(*, now: datetime | None = None) -> int:
    """Heartbeat every simulated cluster's nodes now (when the simulated executor is on);
    returns how many nodes.

    The simulated agents live inside the server: when it starts again after a stop, they are
    as alive as it is. The server calls this before its periodic loop, so the first
    heartbeat check does not find them silent since the stop and mark them all down, ending
    every run on them (a restarted demo lost all its running work).
    """
    if not getattr(settings, "SIMULATED_EXECUTOR_ENABLED", True):
        return 0
    now = now or timezone.now()
    woken = 0
    for cluster in simulated_clusters():
        nodes = list(Node.objects.filter(cluster=cluster, name__startswith=NODE_PREFIX))
        _heartbeat(nodes, now)
        woken += len(nodes)
    return woken


def _heartbeat(nodes: list[Node], now: datetime) -> None:
    """Heartbeat the simulated nodes: one UPDATE for the live ones; a node that the system
    marked down (its heartbeat lapsed while the server was stopped) goes through the
    service, which brings it back."""
    ids = [n.pk for n in nodes]
    Node.objects.filter(pk__in=ids).update(last_heartbeat=now)
    NodeAgent.objects.filter(node_id__in=ids).update(last_seen_at=now)
    for node in nodes:
        if node.state == NodeState.DOWN and node.state_source == NodeStateSource.SYSTEM:
            node_heartbeat(node=node, now=now)
