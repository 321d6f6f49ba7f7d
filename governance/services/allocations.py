"""Writes of shares: a manager's direct split of a node's children on a cluster."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from governance.models import Allocation, Cluster, Organization, Program, Project
from governance.selectors.tree import ShareRow, node_key, share_at
from governance.selectors.visibility import user_visibility
from governance.services.audit import audit_share_change
from governance.services.notifications import share_change_notify
from governance.services.shares import check_siblings_fit, lock_parent, validate_change


def allocation_split(
    *,
    actor,
    parent: Organization | Program,
    cluster: Cluster,
    percents: dict[Program | Project, Decimal],
    reason: str,
    valid_from: datetime | None = None,
    valid_to: datetime | None = None,
) -> list[Allocation]:
    """Set the shares of some or all children of ``parent`` on ``cluster`` directly.

    The actor must manage ``parent`` (org admin for programs, program manager or org admin
    for projects), else ``PermissionDenied``. Children left out keep their share. Rows are
    appended, never edited: ``valid_from`` defaults to now and may not lie in the past;
    ``valid_to`` makes a temporary grant after which the older share applies again. Bad input
    and a split that would push siblings past 100 % at any instant of the window raise a
    ``ValidationError`` naming the field; nothing is written then. The change is recorded in
    the audit trail (``share_change``, percent of each child before and after) in the same
    transaction.
    """
    if not user_visibility(user=actor).can_manage(parent):
        raise PermissionDenied(f"Only a manager of {parent} may split it.")
    items, start, end = validate_change(
        parent=parent,
        cluster=cluster,
        percents=percents,
        reason=reason,
        start=valid_from,
        end=valid_to,
        now=timezone.now(),
        start_field="valid_from",
        end_field="valid_to",
    )
    new_rows = [
        ShareRow(node=node_key(node), percent=percent, valid_from=start, valid_to=end, order=(2, i))
        for i, (node, percent) in enumerate(items)
    ]
    with transaction.atomic():
        lock_parent(parent)
        check_siblings_fit(parent=parent, cluster=cluster, new_rows=new_rows)
        before = {node: share_at(node=node, cluster=cluster, at=start) for node, _ in items}
        rows = [
            Allocation.objects.create(
                cluster=cluster,
                program=node if isinstance(node, Program) else None,
                project=node if isinstance(node, Project) else None,
                percent=percent,
                valid_from=start,
                valid_to=end,
                set_by=actor,
                reason=reason.strip(),
            )
            for node, percent in items
        ]
        audit_share_change(
            actor=actor,
            parent=parent,
            cluster=cluster,
            before=before,
            after=dict(items),
            valid_from=start,
            valid_to=end,
            reason=reason,
        )
        share_change_notify(
            actor=actor, cluster=cluster, before=before, after=dict(items),
            valid_from=start, valid_to=end, reason=reason, now=timezone.now(),
        )  # fmt: skip
        return rows
