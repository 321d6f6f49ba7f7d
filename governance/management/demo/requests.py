"""The demo's approval requests: the PI asks, the program manager decides, through the real
services at the moments they happened in the demo's past."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from governance.management.demo.tree import PI_PROGRAM, PI_PROJECT, DemoTree, json_share
from governance.services.approvals import (
    approval_approve,
    approval_reject,
    approval_request_create,
)


def demo_requests_create(tree: DemoTree, users: dict) -> None:
    """A rejected, an applied and a waiting request by the PI, decided by the manager: rejected
    three weeks ago, applied nine days ago (the history replay schedules with the share it set
    from then on), one waiting since yesterday."""
    vision, project, cluster = tree.programs[PI_PROGRAM], tree.projects[PI_PROJECT], tree.cluster
    pi, manager = users["pi"], users["manager"]
    target = json_share(PI_PROJECT)
    now = timezone.now()

    rejected = approval_request_create(
        actor=pi,
        parent=vision,
        cluster=cluster,
        percents={project: Decimal("60.00")},
        reason="Scaling study for the CVPR submission needs 60 % of vision.",
        now=now - timedelta(days=21, hours=3),
    )
    approval_reject(
        actor=manager,
        approval_request=rejected,
        comment="That would take most of b436b2's share while its run is going. "
        "Ask again once it finishes.",
        now=now - timedelta(days=20, hours=22),
    )
    applied = approval_request_create(
        actor=pi,
        parent=vision,
        cluster=cluster,
        percents={project: target},
        reason="Two new students start this month; bring 6214e9 to its size-proportional share.",
        now=now - timedelta(days=10, hours=5),
    )
    approval_approve(
        actor=manager,
        approval_request=applied,
        comment="Agreed: the free 2.1 % is yours.",
        now=now - timedelta(days=9, hours=1),
    )
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    next_monday = today + timedelta(days=7 - today.weekday())
    approval_request_create(
        actor=pi,
        parent=vision,
        cluster=cluster,
        percents={project: Decimal("30.00")},
        reason="Two weeks of paper writing: lending GPU time back to the program.",
        effective_from=next_monday,
        effective_to=next_monday + timedelta(days=14),
        now=now - timedelta(hours=20),
    )
