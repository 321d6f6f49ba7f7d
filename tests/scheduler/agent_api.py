"""What the node agent API tests share: an agent's credentials and client, the rows a cycle
writes when it starts a run, and ledger sums. Their fixtures (``personas``, ``agent``,
``other_agent``, ``workload``) are in ``agent_endpoints/conftest.py``.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.db.models import Sum
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler.choices import OrderKind, RunLane, WorkloadState
from scheduler.models import Node, Order, Run, RunNode, UsageRecord, Workload
from scheduler.services.executor_reports import node_agent_create, node_register


def user_client(user) -> APIClient:
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def agent_client(raw_token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw_token}")
    return client


class Agent:
    """An agent's credentials and a client that uses them."""

    def __init__(self, cluster, name: str, *, register: bool = True):
        self.record, self.token = node_agent_create(cluster=cluster, name=name)
        self.client = agent_client(self.token)
        self.node = node_register(agent=self.record, gpus=8) if register else None

    def post(self, path: str, body: dict | None = None):
        return self.client.post(f"/api/agent/{path}", body or {}, format="json")


def started_run(
    workload: Workload,
    node: Node,
    *,
    minutes_ago: float = 10,
    ended_reason: str = "",
    by: Workload | None = None,
) -> Run:
    """The rows a scheduling cycle writes when it starts ``workload`` on ``node``.

    ``ended_reason``: the run has ended now, for that reason (``by``: the workload that
    preempted it), and the workload is pending again.
    """
    now = timezone.now()
    started = now - timedelta(minutes=minutes_ago)
    run = Run.objects.create(
        workload=workload,
        attempt=workload.runs.count() + 1,
        project=workload.project,
        cluster=workload.cluster,
        gpus=workload.gpus,
        lane=RunLane.FREE if workload.min_runtime_seconds == 0 else RunLane.CHARGED,
        placement={node.name: workload.gpus},
        started_at=started,
        start_reason="fits",
        accounted_until=started,
        ended_at=now if ended_reason else None,
        end_reason=ended_reason,
        preempted_by=by,
    )
    RunNode.objects.create(run=run, node=node, gpus=workload.gpus)
    Order.objects.create(
        kind=OrderKind.START,
        cluster=workload.cluster,
        node=node,
        run=run,
        idempotency_key=f"start:{run.pk}:{node.pk}",
        payload={
            "workload": workload.pk,
            "run": run.pk,
            "attempt": run.attempt,
            "gpus": workload.gpus,
            "gang_nodes": [node.name],
            "launch_spec": workload.launch_spec,
            "resumable": workload.resumable,
            "declared_duration_seconds": None,
            "remaining_seconds": None,
        },
        created_at=started,
    )
    Workload.objects.filter(pk=workload.pk).update(
        state=WorkloadState.PENDING if ended_reason else WorkloadState.RUNNING,
        first_started_at=started,
    )
    return run


def ledger_total(run: Run) -> Decimal:
    return UsageRecord.objects.filter(run=run).aggregate(s=Sum("gpu_seconds"))["s"] or Decimal(0)


def exact_gpu_seconds(run: Run) -> Decimal:
    seconds = Decimal((run.ended_at - run.started_at) / timedelta(microseconds=1)) / 10**6
    return run.gpus * seconds
