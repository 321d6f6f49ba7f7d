"""Node drain/undrain/down/up, by an operator and by the system, and role changes are recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance.models import AuditEvent, RoleAssignment
from governance.services.roles import role_grant, role_revoke
from scheduler.services.executor_reports import node_heartbeat
from scheduler.services.nodes import (
    node_bring_up,
    node_drain,
    node_mark_down,
    node_undrain,
    nodes_expire_heartbeats,
)
from tests.governance.audit_records.helpers import T0, a_node, only_event

pytestmark = pytest.mark.django_db


# --- Nodes ---------------------------------------------------------------------------------


def test_drain_and_undrain_are_recorded_with_states_and_reason(personas):
    p = personas
    node = a_node(p)
    node_drain(node=node, actor=p.org_admin, reason="Fan failure.", now=T0)
    node_undrain(node=node, actor=p.org_admin, now=T0 + timedelta(hours=2))

    drain = only_event(action="node_drain")
    assert (drain.actor, drain.at, drain.object_kind, drain.object_id) == (
        p.org_admin,
        T0,
        "node",
        node.pk,
    )
    assert drain.object_label == "gpu-01 (h100)"
    assert drain.before == {"state": "healthy"} and drain.after == {"state": "draining"}
    assert drain.reason == "Fan failure."
    undrain = only_event(action="node_undrain")
    assert undrain.at == T0 + timedelta(hours=2)
    assert undrain.before == {"state": "draining"} and undrain.after == {"state": "healthy"}


def test_draining_twice_records_one_event(personas):
    p = personas
    node = a_node(p)
    node_drain(node=node, actor=p.org_admin, reason="Fan failure.", now=T0)
    node_drain(node=node, actor=p.org_admin, reason="Again.", now=T0 + timedelta(minutes=1))
    assert AuditEvent.objects.filter(action="node_drain").count() == 1


def test_mark_down_and_bring_up_are_recorded(personas):
    p = personas
    node = a_node(p)
    node_mark_down(node=node, actor=p.org_admin, reason="PSU replaced.", now=T0)
    node_bring_up(node=node, actor=p.org_admin, now=T0 + timedelta(hours=1))
    down = only_event(action="node_down")
    assert (down.actor, down.reason, down.at) == (p.org_admin, "PSU replaced.", T0)
    assert down.before == {"state": "healthy"} and down.after == {"state": "down"}
    up = only_event(action="node_up")
    assert up.before == {"state": "down"} and up.after == {"state": "healthy"}


def test_silent_agent_down_and_its_return_are_recorded_as_the_system(personas, settings):
    p = personas
    settings.SCHEDULER_AGENT_TIMEOUT_SECONDS = 60
    node = a_node(p, at=T0)
    nodes_expire_heartbeats(now=T0 + timedelta(minutes=5))
    down = only_event(action="node_down")
    assert down.actor is None and down.before == {"state": "healthy"}
    assert down.reason.startswith("No heartbeat since")

    node_heartbeat(node=node, now=T0 + timedelta(minutes=6))
    up = only_event(action="node_up")
    assert up.actor is None and up.after == {"state": "healthy"}
    assert up.at == T0 + timedelta(minutes=6)


# --- Roles ---------------------------------------------------------------------------------


def test_granting_and_revoking_a_role_are_recorded(personas):
    p = personas
    assignment = role_grant(
        actor=p.program_manager,
        user=p.outsider,
        role="researcher",
        scope=p.project_a2,
        reason="Joins Segmentation.",
    )
    granted = only_event(action="role_granted")
    assert (granted.actor, granted.object_kind, granted.object_id) == (
        p.program_manager,
        "user",
        p.outsider.pk,
    )
    assert granted.before == {}
    assert granted.after == {"role": "researcher", "scope": "project Segmentation (Vision)"}
    assert granted.reason == "Joins Segmentation."

    role_revoke(actor=p.org_admin, assignment=assignment, reason="Left.")
    revoked = only_event(action="role_revoked")
    assert revoked.actor == p.org_admin
    assert revoked.before == {"role": "researcher", "scope": "project Segmentation (Vision)"}
    assert revoked.after == {}
    assert not RoleAssignment.objects.filter(pk=assignment.pk).exists()
