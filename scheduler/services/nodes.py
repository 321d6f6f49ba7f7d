"""Node states: operator actions (drain, undrain, mark down) and heartbeat expiry.

A drain is carried out by the engine at each cycle: nothing new lands on a draining node,
each of its workloads is evicted once it passes its minimum runtime, and the node becomes
``drained`` when no run is left on it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from governance.choices import AuditAction
from governance.models import Cluster
from governance.services.audit import audit_record
from scheduler.choices import NodeState, NodeStateSource, RunEndReason
from scheduler.models import Node, Run
from scheduler.services.locks import ACCOUNTING_LOCK, locked_transaction
from scheduler.services.node_notices import node_changed_notify
from scheduler.services.runs import cycle_enqueue, run_end
from scheduler.services.usage import usage_account

# Node state reached → audit action (governance.services.audit).
AUDIT_ACTIONS = {
    NodeState.DRAINING: AuditAction.NODE_DRAIN,
    NodeState.DOWN: AuditAction.NODE_DOWN,
}


def _set_state(
    *,
    node: Node,
    allowed: tuple[str, ...],
    state: str,
    source: str,
    actor,
    reason: str,
    now,
    audit: str | None = None,
) -> bool:
    """Compare-and-set the node's state; ``True`` when this call changed it.

    A change is recorded in the audit trail (``audit``, default by the state reached) in
    the caller's transaction, with the state before and after. The row lock taken to read
    the state before is the one the update takes anyway, at the same point.

    Accounting is brought up to ``now`` first (under its lock, taken before the node's row
    as every writer that ends runs does): entitlement counts the healthy GPUs of each pass,
    so a node that leaves or rejoins service between two passes must close the interval at
    its change, or its seconds are owed at the wrong capacity (occupancy passed 100 %).
    """
    with locked_transaction(ACCOUNTING_LOCK, node.cluster_id, wait=True):
        usage_account(cluster=Cluster.objects.get(pk=node.cluster_id), now=now)
        previous = (
            Node.objects.select_for_update()
            .filter(pk=node.pk, state__in=allowed)
            .values_list("state", flat=True)
            .first()
        )
        if previous is None:
            return False
        Node.objects.filter(pk=node.pk).update(
            state=state,
            state_source=source,
            state_reason=reason,
            state_changed_at=now,
            state_changed_by=actor,
        )
        node_state_audit(
            node=node,
            action=audit or AUDIT_ACTIONS[state],
            actor=actor,
            before=previous,
            after=state,
            reason=reason,
            now=now,
        )
        return True


def node_state_audit(
    *, node: Node, action: str, actor, before: str, after: str, reason: str, now: datetime
) -> None:
    """Record a change of a node's state in the audit trail (inside the change's transaction).

    ``actor`` is ``None`` when the system changed it (heartbeat expiry or return).
    """
    cluster = Cluster.objects.only("organization_id", "name").get(pk=node.cluster_id)
    audit_record(
        action=action,
        organization_id=cluster.organization_id,
        actor=actor,
        object_kind="node",
        object_id=node.pk,
        object_label=f"{node.name} ({cluster.name})",
        before={"state": before},
        after={"state": after},
        reason=reason,
        at=now,
    )


def node_drain(*, node: Node, actor, reason: str = "", now: datetime | None = None) -> Node:
    """Mark a healthy node for repair: it takes nothing new and empties as runs pass their
    minimum runtime (the engine evicts them; no one negotiates with job owners).

    Draining an already draining or drained node changes nothing; a down node cannot drain.
    """
    return _operator_set_state(
        node=node,
        allowed=(NodeState.HEALTHY,),
        state=NodeState.DRAINING,
        actor=actor,
        reason=reason or "Drain requested.",
        now=now,
        when_down="it cannot be drained.",
    )


def node_undrain(*, node: Node, actor, now: datetime | None = None) -> Node:
    """Return a draining or drained node to service (healthy)."""
    return _operator_set_state(
        node=node,
        allowed=(NodeState.DRAINING, NodeState.DRAINED),
        state=NodeState.HEALTHY,
        actor=actor,
        reason="Returned to service.",
        now=now,
        when_down="bring its agent back.",
        audit=AuditAction.NODE_UNDRAIN,
    )


def _operator_set_state(
    *,
    node: Node,
    allowed: tuple[str, ...],
    state: str,
    actor,
    reason: str,
    now: datetime | None,
    when_down: str,
    audit: str | None = None,
) -> Node:
    """An operator's drain or undrain: move ``node`` from one of ``allowed`` to ``state`` and
    wake the cycle; a down node refuses it, ``when_down`` saying what to do instead. A node
    already past the change is left as it is."""
    now = now or timezone.now()
    with transaction.atomic():
        changed = _set_state(
            node=node,
            allowed=allowed,
            state=state,
            source=NodeStateSource.OPERATOR,
            actor=actor,
            reason=reason,
            now=now,
            audit=audit,
        )
        node.refresh_from_db()
        if not changed and node.state == NodeState.DOWN:
            raise ValidationError({"state": [f"{node.name} is down; {when_down}"]})
        if changed:
            cycle_enqueue(cluster_id=node.cluster_id)
    return node


def _end_runs_on(node: Node, *, now: datetime) -> int:
    runs = list(Run.objects.filter(run_nodes__node=node, ended_at__isnull=True))
    for run in runs:
        run_end(
            run=run,
            reason=RunEndReason.NODE_DOWN,
            now=now,
            reporting_node=node,
            explanation=f"node {node.name} went down",
        )
    return len(runs)


def node_mark_down(
    *,
    node: Node,
    actor=None,
    reason: str = "",
    now: datetime | None = None,
    source: str = NodeStateSource.OPERATOR,
) -> Node:
    """Take a node out: its runs end now (``node_down``) and their workloads are requeued.

    An operator's "down" stays until an operator returns the node with ``node_bring_up``;
    a down set by heartbeat expiry (``source=system``) ends at the agent's next heartbeat.
    """
    now = now or timezone.now()
    with locked_transaction(ACCOUNTING_LOCK, node.cluster_id, wait=True):
        changed = _set_state(
            node=node,
            allowed=(NodeState.HEALTHY, NodeState.DRAINING, NodeState.DRAINED),
            state=NodeState.DOWN,
            source=source,
            actor=actor,
            reason=reason or "Marked down.",
            now=now,
        )
        _end_runs_on(node, now=now)
        node.refresh_from_db()
        if changed:
            node_changed_notify(
                node=node, went="down", reason=reason or "Marked down.", actor=actor, now=now
            )
    return node


def node_bring_up(*, node: Node, actor, now: datetime | None = None) -> Node:
    """Return a down node to service (an operator's decision after a repair)."""
    now = now or timezone.now()
    with transaction.atomic():
        if _set_state(
            node=node,
            allowed=(NodeState.DOWN,),
            state=NodeState.HEALTHY,
            source=NodeStateSource.OPERATOR,
            actor=actor,
            reason="Brought back up.",
            now=now,
            audit=AuditAction.NODE_UP,
        ):
            cycle_enqueue(cluster_id=node.cluster_id)
        node.refresh_from_db()
    return node


def nodes_expire_heartbeats(*, now: datetime | None = None) -> list[Node]:
    """Mark down every node whose agent has been silent for SCHEDULER_AGENT_TIMEOUT_SECONDS.

    Their runs end now (``node_down``) and their workloads are requeued. Nodes that never
    heartbeated (no agent, e.g. the simulated executor's) are left alone. When the agent
    heartbeats again, the node comes back healthy (``node_heartbeat``).
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.SCHEDULER_AGENT_TIMEOUT_SECONDS)
    expired = []
    silent = Node.objects.filter(
        state__in=(NodeState.HEALTHY, NodeState.DRAINING, NodeState.DRAINED),
        last_heartbeat__lt=cutoff,
    )
    for node in silent:
        with locked_transaction(ACCOUNTING_LOCK, node.cluster_id, wait=True):
            # Compare-and-set: a heartbeat that arrived meanwhile keeps the node up.
            changed = (
                Node.objects.filter(
                    pk=node.pk,
                    state__in=(NodeState.HEALTHY, NodeState.DRAINING, NodeState.DRAINED),
                    last_heartbeat__lt=cutoff,
                ).update(
                    state=NodeState.DOWN,
                    state_source=NodeStateSource.SYSTEM,
                    state_reason=f"No heartbeat since {node.last_heartbeat:%Y-%m-%d %H:%M:%S}.",
                    state_changed_at=now,
                    state_changed_by=None,
                )
                == 1
            )
            if changed:
                node_state_audit(
                    node=node,
                    action=AuditAction.NODE_DOWN,
                    actor=None,
                    before=node.state,
                    after=NodeState.DOWN,
                    reason=f"No heartbeat since {node.last_heartbeat:%Y-%m-%d %H:%M:%S}.",
                    now=now,
                )
                _end_runs_on(node, now=now)
                node.refresh_from_db()
                node_changed_notify(node=node, went="down", reason=node.state_reason, now=now)
                expired.append(node)
    return expired
