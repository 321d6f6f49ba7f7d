"""What node agents and executors report: registration, heartbeats, orders, exits.

The node agent API (token auth) and the simulated executor call these. Every report is
idempotent: a retried request (same order acknowledged twice, same exit reported twice)
changes nothing the second time and returns the same object.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Case, F, IntegerField, Value, When
from django.utils import timezone

from governance.choices import AuditAction
from governance.models import Cluster
from scheduler.choices import (
    OPEN_ORDER_STATES,
    ExitOutcome,
    NodeState,
    NodeStateSource,
    OrderKind,
    OrderState,
    RunEndReason,
)
from scheduler.models import Node, NodeAgent, Order, Run
from scheduler.services.locks import ACCOUNTING_LOCK, locked_transaction
from scheduler.services.nodes import node_state_audit
from scheduler.services.runs import cycle_enqueue, run_end


def token_hash(raw_token: str) -> str:
    """SHA-256 hex digest of a raw agent token (only the digest is stored)."""
    return hashlib.sha256(raw_token.encode()).hexdigest()


def node_agent_create(*, cluster: Cluster, name: str, created_by=None) -> tuple[NodeAgent, str]:
    """Create credentials for the agent of node ``name``; the raw token is returned once."""
    if not name or not name.strip():
        raise ValidationError({"name": ["Give the node name the agent will register as."]})
    raw = secrets.token_urlsafe(32)
    agent = NodeAgent.objects.create(
        cluster=cluster,
        name=name.strip(),
        token_hash=token_hash(raw),
        token_prefix=raw[:8],
        created_by=created_by,
    )
    return agent, raw


def node_agent_authenticate(*, raw_token: str) -> NodeAgent | None:
    """The active agent holding ``raw_token``, or ``None``."""
    if not raw_token:
        return None
    return (
        NodeAgent.objects.select_related("cluster", "node")
        .filter(token_hash=token_hash(raw_token), revoked_at__isnull=True)
        .first()
    )


def node_register(*, agent: NodeAgent, gpus: int, now: datetime | None = None) -> Node:
    """Create or update the agent's node (``agent.name`` in its cluster) and heartbeat it."""
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise ValidationError({"gpus": ["Must be a whole number of GPUs, at least 1."]})
    now = now or timezone.now()
    with transaction.atomic():
        node, created = Node.objects.get_or_create(
            cluster=agent.cluster,
            name=agent.name,
            defaults={"gpus": gpus, "last_heartbeat": now, "state_changed_at": now},
        )
        if not created and node.gpus != gpus:
            node.gpus = gpus
            node.save(update_fields=["gpus"])
        if agent.node_id != node.id:
            agent.node = node
            agent.save(update_fields=["node"])
        node = node_heartbeat(node=node, now=now)
        if created:
            cycle_enqueue(cluster_id=node.cluster_id)
    return node


def node_heartbeat(*, node: Node, now: datetime | None = None) -> Node:
    """Record that the node's agent is alive; revive a node the system marked down."""
    now = now or timezone.now()
    with transaction.atomic():
        Node.objects.filter(pk=node.pk).update(last_heartbeat=now)
        NodeAgent.objects.filter(node=node).update(last_seen_at=now)
        revived = Node.objects.filter(
            pk=node.pk, state=NodeState.DOWN, state_source=NodeStateSource.SYSTEM
        ).update(
            state=NodeState.HEALTHY,
            state_source=NodeStateSource.AGENT,
            state_reason="Agent heartbeating again.",
            state_changed_at=now,
        )
        if revived:
            node_state_audit(
                node=node,
                action=AuditAction.NODE_UP,
                actor=None,
                before=NodeState.DOWN,
                after=NodeState.HEALTHY,
                reason="Agent heartbeating again.",
                now=now,
            )
            cycle_enqueue(cluster_id=node.cluster_id)
        node.refresh_from_db()
    return node


def orders_deliver(*, node: Node, now: datetime | None = None) -> list[Order]:
    """The node's open orders (new and already delivered), stops first, then oldest first.

    Marks them delivered. Fetching again returns the same orders until they are
    acknowledged: an agent that lost a response simply gets them again (it uses
    ``idempotency_key`` to skip what it already did).
    """
    now = now or timezone.now()
    with transaction.atomic():
        Order.objects.filter(node=node, state=OrderState.CREATED).update(
            state=OrderState.DELIVERED, delivered_at=now
        )
        open_orders = Order.objects.filter(node=node, state__in=OPEN_ORDER_STATES)
        open_orders.update(delivery_count=F("delivery_count") + 1)
        return list(
            open_orders.select_related("run").order_by(
                Case(
                    When(kind=OrderKind.STOP, then=Value(0)),
                    default=Value(1),
                    output_field=IntegerField(),
                ),
                "created_at",
                "id",
            )
        )


def order_acknowledge(*, order: Order, now: datetime | None = None) -> Order:
    """The agent carried out ``order``. Idempotent (compare-and-set on the state).

    A stop acknowledged on the last node of its run ends the run (reason: why the stop was
    ordered), closes its ledger and requeues a preempted workload.
    """
    now = now or timezone.now()
    with locked_transaction(ACCOUNTING_LOCK, order.cluster_id, wait=True):
        acked = Order.objects.filter(pk=order.pk, state__in=OPEN_ORDER_STATES).update(
            state=OrderState.ACKNOWLEDGED, acknowledged_at=now
        )
        order.refresh_from_db()
        if acked and order.kind == OrderKind.STOP:
            still_open = Order.objects.filter(
                run_id=order.run_id, kind=OrderKind.STOP, state__in=OPEN_ORDER_STATES
            ).exists()
            run = Run.objects.get(pk=order.run_id)
            if not still_open and run.ended_at is None:
                run_end(run=run, reason=run.stop_reason or RunEndReason.PREEMPTED, now=now)
    return order


def run_report_exit(
    *,
    run: Run,
    outcome: str,
    exit_code: int | None = None,
    node: Node | None = None,
    now: datetime | None = None,
) -> Run:
    """A workload's process ended (on ``node``, when the reporter is a node agent).

    ``outcome`` is an ``ExitOutcome``: succeeded / failed end the workload; preempted means
    it stopped because of a stop order (the run ends with the reason the stop was ordered
    for). Idempotent: the same exit reported twice ends the run once.
    """
    if outcome not in ExitOutcome.values:
        raise ValidationError({"outcome": [f"Must be one of {', '.join(ExitOutcome.values)}."]})
    if outcome == ExitOutcome.PREEMPTED:
        run.refresh_from_db(fields=["stop_reason"])
        reason = run.stop_reason or RunEndReason.PREEMPTED
    else:
        reason = outcome
    return run_end(run=run, reason=reason, now=now, exit_code=exit_code, reporting_node=node)
