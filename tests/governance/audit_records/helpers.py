"""What the audit-record tests share: the moment they start, the one event a change wrote,
the PI's request, a registered node."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from governance.models import AuditEvent
from governance.services.approvals import (
    approval_request_create,
)
from scheduler.services.executor_reports import node_agent_create, node_register

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def only_event(**filters) -> AuditEvent:
    events = list(AuditEvent.objects.filter(**filters))
    assert len(events) == 1, f"expected one event for {filters}, got {events}"
    return events[0]


def pi_asks(p, percent: str, **kwargs):
    return approval_request_create(
        actor=p.pi,
        parent=p.program_a,
        cluster=p.cluster,
        percents={p.project_a1: Decimal(percent)},
        reason="Paper deadline.",
        **kwargs,
    )


def a_node(p, name="gpu-01", at=T0):
    agent, _token = node_agent_create(cluster=p.cluster, name=name)
    return node_register(agent=agent, gpus=8, now=at)
