"""The audit trail: one append-only ``AuditEvent`` per change, written with the change.

Services that change shares, decide approvals, operate nodes, force preemptions or change
roles call ``audit_record`` (or one of the helpers below) *inside* their own transaction:
if the change rolls back, so does its event, and a committed change always has one. Nothing
here updates or deletes an event, except ``audit_events_purge`` when a whole organization is
deleted (the demo's ``--reset``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from django.db import connection, transaction
from django.utils import timezone

from governance.choices import AuditAction
from governance.models import AuditEvent, Cluster, Organization, Program, Project


def _jsonable(value):
    """Decimals as fixed strings ("55.00"), datetimes as ISO 8601: exact and readable."""
    if isinstance(value, Decimal):
        return f"{value:.2f}"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def audit_record(
    *,
    action: AuditAction | str,
    organization_id: int,
    actor,
    object_kind: str,
    object_id: int,
    object_label: str,
    before: Mapping | None = None,
    after: Mapping | None = None,
    reason: str = "",
    at: datetime | None = None,
) -> AuditEvent:
    """Append one audit event; call it inside the transaction of the change it records.

    ``actor`` is a user or ``None`` for the system. ``before``/``after`` are flat mappings of
    what changed (Decimals and datetimes are stored as strings). Raises ``RuntimeError``
    outside a transaction: an event written on its own could survive a change that failed.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change.")
    return AuditEvent.objects.create(
        at=at or timezone.now(),
        actor=actor if actor is not None and getattr(actor, "pk", None) else None,
        actor_label=getattr(actor, "username", "") if actor is not None else "",
        action=AuditAction(action),
        organization_id=organization_id,
        object_kind=object_kind,
        object_id=object_id,
        object_label=str(object_label)[:200],
        before=_jsonable(dict(before or {})),
        after=_jsonable(dict(after or {})),
        reason=str(reason or "").strip(),
    )


def _organization_id(node: Organization | Program | Project) -> int:
    if isinstance(node, Organization):
        return node.pk
    if isinstance(node, Program):
        return node.organization_id
    return node.program.organization_id


def audit_share_change(
    *,
    actor,
    parent: Organization | Program,
    cluster: Cluster,
    before: Mapping[Program | Project, Decimal],
    after: Mapping[Program | Project, Decimal],
    valid_from: datetime,
    valid_to: datetime | None,
    reason: str,
    at: datetime | None = None,
) -> AuditEvent:
    """Record a change of the shares of some children of ``parent`` on ``cluster`` (made at
    ``at``, default now).

    ``before``/``after`` map each changed child to its percent just before the change took
    effect and the percent it now holds; the event keys them by the child's name and adds
    the window of the new rows to ``after``.
    """
    kind = "organization" if isinstance(parent, Organization) else "program"
    return audit_record(
        action=AuditAction.SHARE_CHANGE,
        organization_id=_organization_id(parent),
        actor=actor,
        object_kind=kind,
        object_id=parent.pk,
        object_label=f"{parent} on {cluster.name}",
        before={node.name: percent for node, percent in before.items()},
        after={
            **{node.name: percent for node, percent in after.items()},
            "valid_from": valid_from,
            "valid_to": valid_to,
        },
        reason=reason,
        at=at,
    )


def audit_events_purge(*, organization: Organization) -> int:
    """Delete every audit event of ``organization``; only for deleting the organization itself.

    The database refuses deletes of audit events unless this transaction says it is purging
    (``governance.audit_purge``, PostgreSQL trigger of migration 0005). Returns how many
    events went. Must run inside the transaction that deletes the organization.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("Purge audit events only in the transaction deleting the organization.")
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL governance.audit_purge = 'on'")
        events = AuditEvent.objects.filter(organization=organization)
        # ``_raw_delete`` because the manager's ``delete()`` refuses on purpose.
        deleted = events._raw_delete(events.db)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL governance.audit_purge = 'off'")
    return deleted
