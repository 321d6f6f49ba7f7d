"""What operators are told about their nodes: one went down, or finished draining.

Operators are the org admins of the node's organization; the one who caused the change (an
operator marking a node down) is not told of their own act. Called inside the transaction
of the change. Many nodes of one cluster in an hour (a rack losing power) fold into one notice
per operator.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.urls import reverse

from governance.choices import NotificationKind, Role
from governance.models import RoleAssignment
from governance.services.notifications import Notice, notify
from scheduler.models import Node


def operators_of(node: Node, *, except_user=None):
    """The users who operate ``node``: org admins of its cluster's organization."""
    ids = RoleAssignment.objects.filter(
        role=Role.ORG_ADMIN, organization_id=node.cluster.organization_id
    ).values_list("user_id", flat=True)
    users = get_user_model().objects.filter(pk__in=ids, is_active=True).order_by("pk")
    return users.exclude(pk=except_user.pk) if except_user is not None else users


def node_changed_notify(*, node: Node, went: str, reason: str, actor=None, now) -> None:
    """Tell ``node``'s operators that it ``went`` ``down`` or ``drained``."""
    cluster = node.cluster
    if went == "down":
        title = f"Node {node.name} of {cluster.name} went down"
        burst = f"{{count}} nodes of {cluster.name} went down or finished draining"
    else:
        title = f"Node {node.name} of {cluster.name} finished draining: ready for repair"
        burst = f"{{count}} nodes of {cluster.name} went down or finished draining"
    by = f" (by {actor.get_username()})" if actor is not None else ""
    notify(
        recipients=operators_of(node, except_user=actor),
        notice=Notice(
            kind=NotificationKind.NODE_ATTENTION,
            title=title + by,
            body=reason,
            link=reverse("scheduler:node-detail", args=[node.pk]),
            organization_id=cluster.organization_id,
            event_key=f"node:{node.pk}:{went}:{now.isoformat()}",
            collapse_key=f"cluster:{cluster.pk}:nodes",
            burst_title=burst,
            burst_link=reverse("scheduler:nodes") + "?" + urlencode({"cluster": cluster.pk}),
        ),
        now=now,
    )
