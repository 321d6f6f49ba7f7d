"""The permission matrix: every page and API route, for six personas and an anonymous visitor.

Routes are GENERATED from the URL configuration (``get_resolver()`` walked recursively), so a
new route fails ``test_route_has_a_permission_decision`` until someone writes down, in
``DECISIONS`` below, what each persona gets. The only routes left out are in ``SKIPPED``, each
with the reason.

For every route the test sends a GET and a POST as each persona (ids are the personas' own
objects: Vision, Detection, the h100 cluster, the PI's request) and, for routes that take
ids, again with another program's or organization's object (Language, Translation, a foreign
cluster, another PI's request) — the cross-tenant checks. Each request runs in a savepoint
that is rolled back, so one persona's approval does not change what the next one sees.

Outcomes, one per column in ``COLUMNS`` order:
``200 201 302 400 403 404 405`` — that status (``302``: a redirect that is *not* to sign-in);
``login`` — a redirect to the sign-in page (pages, for the anonymous visitor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import pytest
from django.conf import settings
from django.db import transaction
from django.shortcuts import resolve_url
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from governance.choices import NotificationKind
from governance.models import Allocation, Notification
from governance.services.approvals import approval_request_create
from governance.services.notification_mail import unsubscribe_token
from scheduler.services.executor_reports import node_agent_create, node_register
from scheduler.services.workloads import workload_submit
from tests.factories import ClusterFactory, OrganizationFactory, UserFactory, pi_of
from tests.personas import PERSONA_NAMES, Personas

pytestmark = pytest.mark.django_db

COLUMNS = (*PERSONA_NAMES, "anonymous")

# Route prefixes left out of the matrix, and why. Everything else must have a decision.
SKIPPED = {
    "admin/": "Django admin: staff only, guarded by Django's own is_staff/permission checks.",
    "accounts/": "django-allauth sign-in, sign-up, sign-out, password reset: open by design.",
    "api/schema/": "OpenAPI schema: public by design (no data), tested in test_api_schema.py.",
    "api/docs/": "Swagger UI around the schema: public by design, tested in test_api_schema.py.",
    "static/": "Static files.",
}


# --- The world the matrix runs in ----------------------------------------------------------


@dataclass
class World:
    """The personas plus the objects the matrix points at (own and cross-tenant)."""

    p: Personas
    foreign_organization: object
    foreign_cluster: object
    pi_b: object  # PI of Translation (project B1, program Language)
    request_a: object  # submitted by the PI: Detection 50 → 55 %
    draft_a: object  # the PI's draft: Detection 50 → 52 %
    request_b: object  # submitted by pi_b: Translation 70 → 65 %
    draft_b: object  # pi_b's draft: Translation 70 → 68 %
    allocation_a1: object
    allocation_b1: object
    workload_a: object  # submitted by the researcher on Detection
    workload_b: object  # submitted by pi_b on Translation
    node_a: object  # a registered node of the personas' cluster
    node_foreign: object  # a node of the foreign organization's cluster


@pytest.fixture
def fast_password_hasher(settings):
    """Hash passwords cheaply; requested before ``personas`` so the personas use it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(fast_password_hasher, personas) -> World:
    p = personas
    foreign_organization = OrganizationFactory(name="Elsewhere Labs", slug="elsewhere")
    foreign_cluster = ClusterFactory(organization=foreign_organization)
    pi_b = UserFactory(username="pi_b")
    pi_of(p.project_b1, pi_b)

    def ask(actor, parent, node, percent, submit=True):
        return approval_request_create(
            actor=actor,
            parent=parent,
            cluster=p.cluster,
            percents={node: Decimal(percent)},
            reason="Permission matrix.",
            submit=submit,
        )

    def submit(project, user):
        return workload_submit(
            project=project,
            cluster=p.cluster,
            name="matrix",
            gpus=1,
            min_runtime_seconds=600,
            launch_spec={"command": ["true"]},
            submitted_by=user,
        )

    def node(cluster, name):
        agent, _token = node_agent_create(cluster=cluster, name=name)
        return node_register(agent=agent, gpus=8)

    return World(
        p=p,
        workload_a=submit(p.project_a1, p.researcher),
        workload_b=submit(p.project_b1, pi_b),
        node_a=node(p.cluster, "node-a"),
        node_foreign=node(foreign_cluster, "node-f"),
        foreign_organization=foreign_organization,
        foreign_cluster=foreign_cluster,
        pi_b=pi_b,
        request_a=ask(p.pi, p.program_a, p.project_a1, "55"),
        draft_a=ask(p.pi, p.program_a, p.project_a1, "52", submit=False),
        request_b=ask(pi_b, p.program_b, p.project_b1, "65"),
        draft_b=ask(pi_b, p.program_b, p.project_b1, "68", submit=False),
        allocation_a1=Allocation.objects.get(project=p.project_a1),
        allocation_b1=Allocation.objects.get(project=p.project_b1),
    )


# --- Payloads ------------------------------------------------------------------------------


def api_split(w: World, program, project, percent: str) -> dict:
    return {
        "parent": {"kind": "program", "id": program.pk},
        "cluster": w.p.cluster.pk,
        "shares": [{"node": project.pk, "percent": percent}],
        "reason": "Permission matrix.",
    }


def api_request(w: World, program, project, percent: str) -> dict:
    return {
        "parent": {"kind": "program", "id": program.pk},
        "cluster": w.p.cluster.pk,
        "lines": [{"node": project.pk, "percent": percent}],
        "reason": "Permission matrix.",
    }


def page_split(changed, percent: str, sibling, sibling_percent: str) -> dict:
    """The split editor's form: every editable child's percent (a PI edits only theirs)."""
    return {
        f"percent_{changed.pk}": percent,
        f"percent_{sibling.pk}": sibling_percent,
        "reason": "Permission matrix.",
    }


def workload_body(project) -> dict:
    return {"project": project.pk, "gpus": 1, "launch_spec": {"command": ["true"]}}


def token_payload(w: World, persona: str) -> dict:
    if persona == "anonymous":
        return {}
    return {"username": persona, "password": w.p.password}


# --- The one table of decisions ------------------------------------------------------------

SAME_AS_GET = "same as GET"


@dataclass(frozen=True)
class Decision:
    """What each persona gets from one route.

    ``get``/``post`` are seven outcomes in ``COLUMNS`` order for the personas' own objects;
    ``get_other``/``post_other`` for the cross-tenant object named by ``other``. ``post=None``
    means the route does not accept POST: every signed-in persona gets 405, the anonymous
    visitor what they get for GET. ``post=SAME_AS_GET``: the page answers POST like GET.
    """

    get: str
    post: str | None = None
    url: Callable[[World], dict] | None = None
    other: Callable[[World], dict] | None = None
    get_other: str | None = None
    post_other: str | None = None
    payload: Callable[[World, str], dict] | None = None
    payload_other: Callable[[World, str], dict] | None = None


def _org_admin_notice(w):
    return {"pk": Notification.objects.filter(recipient=w.p.org_admin).first().pk}


def _pi_b_notice(w):
    notice, _ = Notification.objects.get_or_create(
        recipient=w.pi_b,
        event_key="matrix",
        defaults={"kind": "approval_decided", "title": "Your request was approved"},
    )
    return {"pk": notice.pk}


def _program_a(w):
    return {"pk": w.p.program_a.pk}


def _program_b(w):
    return {"pk": w.p.program_b.pk}


def _project_a1(w):
    return {"pk": w.p.project_a1.pk}


def _project_b1(w):
    return {"pk": w.p.project_b1.pk}


def _whatif(user, cluster, parent_kind, parent_id):
    """A what-if run of ``user`` on ``cluster`` (no replay needed)."""
    from django.utils import timezone

    from scheduler.models import WhatIfRun

    run, _ = WhatIfRun.objects.get_or_create(
        created_by=user,
        cluster=cluster,
        parent_kind=parent_kind,
        parent_id=parent_id,
        defaults={"days": 14, "window_end": timezone.now(), "key": "matrix",
                  "created_at": timezone.now()},
    )  # fmt: skip
    return run


def api_whatif(w: World, program, project, percent: str) -> dict:
    return {
        "parent": {"kind": "program", "id": program.pk},
        "cluster": w.p.cluster.pk,
        "shares": [{"node": project.pk, "percent": percent}],
    }


def _request_a(w):
    return {"pk": w.request_a.pk}


def _request_b(w):
    return {"pk": w.request_b.pk}


def _simulation(user, organization):
    """A finished-or-not simulation job of ``user`` in ``organization`` (no run needed)."""
    from django.utils import timezone

    from scheduler.models import SimulationJob

    job, _ = SimulationJob.objects.get_or_create(
        created_by=user,
        organization=organization,
        defaults={"trace_source": "philly", "parameters": {}, "created_at": timezone.now()},
    )
    return job


def _comment(w, persona):
    return {"comment": "Permission matrix."}


def _audit_event(organization):
    """An audit event of ``organization`` (the trail is empty in a fresh world)."""
    from governance.services.audit import audit_record

    return audit_record(
        action="share_change",
        organization_id=organization.pk,
        actor=None,
        object_kind="organization",
        object_id=organization.pk,
        object_label=str(organization),
        reason="Permission matrix.",
    )


def _researcher_role(w):
    from governance.models import RoleAssignment

    return {"pk": RoleAssignment.objects.get(user=w.p.researcher, project=w.p.project_a1).pk}


def _pi_b_role(w):
    from governance.models import RoleAssignment

    return {"pk": RoleAssignment.objects.get(user=w.pi_b, project=w.p.project_b1).pk}


def _api_grant(project) -> dict:
    """Make the outsider a researcher of ``project``."""
    return {
        "user": "outsider",
        "role": "researcher",
        "scope": {"kind": "project", "id": project.pk},
        "reason": "Permission matrix.",
    }


# Columns:                  org_admin program_manager pi researcher finance outsider anonymous
ALL_SIGNED_IN = "200 200 200 200 200 200 403"
SEEN_BY_ORG = "200 200 200 200 200 404 403"  # the personas' own org, cluster, Vision, Detection
ANOTHER_PROGRAM = "200 404 404 404 200 404 403"  # Language, Translation: whole-org roles only
ANOTHER_ORG = "404 404 404 404 404 404 403"  # a foreign organization or cluster
NO_PERSONA = "401 401 401 401 401 401 401"  # node agent endpoints: agent tokens only
PAGE_ALL_SIGNED_IN = "200 200 200 200 200 200 login"
PAGE_SEEN_BY_ORG = "200 200 200 200 200 404 login"
PAGE_ANOTHER_PROGRAM = "200 404 404 404 200 404 login"
PAGE_ANOTHER_ORG = "404 404 404 404 404 404 login"

DECISIONS: dict[str, Decision] = {
    # --- API ---------------------------------------------------------------------------
    "api:api-root": Decision(get=ALL_SIGNED_IN),
    "api:report-usage": Decision(get="200 403 403 403 200 403 403"),
    "api:token": Decision(
        get="405 405 405 405 405 405 405",
        post="200 200 200 200 200 200 400",  # own username + password; anonymous sends none
        payload=token_payload,
    ),
    "api:organization-list": Decision(get=ALL_SIGNED_IN),
    "api:organization-detail": Decision(
        url=lambda w: {"pk": w.p.organization.pk},
        get=SEEN_BY_ORG,
        other=lambda w: {"pk": w.foreign_organization.pk},
        get_other=ANOTHER_ORG,
    ),
    "api:program-list": Decision(get=ALL_SIGNED_IN),
    "api:program-detail": Decision(
        url=_program_a, get=SEEN_BY_ORG, other=_program_b, get_other=ANOTHER_PROGRAM
    ),
    "api:program-history": Decision(
        url=_program_a, get=SEEN_BY_ORG, other=_program_b, get_other=ANOTHER_PROGRAM
    ),
    "api:project-list": Decision(get=ALL_SIGNED_IN),
    "api:project-detail": Decision(
        url=_project_a1, get=SEEN_BY_ORG, other=_project_b1, get_other=ANOTHER_PROGRAM
    ),
    "api:project-history": Decision(
        url=_project_a1, get=SEEN_BY_ORG, other=_project_b1, get_other=ANOTHER_PROGRAM
    ),
    "api:cluster-list": Decision(get=ALL_SIGNED_IN),
    "api:cluster-detail": Decision(
        url=lambda w: {"pk": w.p.cluster.pk},
        get=SEEN_BY_ORG,
        other=lambda w: {"pk": w.foreign_cluster.pk},
        get_other=ANOTHER_ORG,
    ),
    # The idle rule: read by whoever sees the cluster, set (PUT) by its org admins only
    # (the PUT matrix is in tests/scheduler/test_api_utilization.py).
    "api:cluster-idle-policy": Decision(
        url=lambda w: {"pk": w.p.cluster.pk},
        get=SEEN_BY_ORG,
        post="405 405 405 405 405 405 403",
        other=lambda w: {"pk": w.foreign_cluster.pk},
        get_other=ANOTHER_ORG,
        post_other="405 405 405 405 405 405 403",
    ),
    "api:cluster-tree": Decision(
        url=lambda w: {"pk": w.p.cluster.pk},
        get=SEEN_BY_ORG,
        other=lambda w: {"pk": w.foreign_cluster.pk},
        get_other=ANOTHER_ORG,
    ),
    "api:allocation-list": Decision(get=ALL_SIGNED_IN),
    "api:allocation-detail": Decision(
        url=lambda w: {"pk": w.allocation_a1.pk},
        get=SEEN_BY_ORG,
        other=lambda w: {"pk": w.allocation_b1.pk},
        get_other=ANOTHER_PROGRAM,
    ),
    # Splits: managers of the parent only; a role that sees Vision but may not split it is
    # 403, one that cannot see the parent (Language for the program manager) 404.
    "api:split-list": Decision(
        get="405 405 405 405 405 405 403",
        post="201 201 403 403 403 404 403",
        payload=lambda w, _: api_split(w, w.p.program_a, w.p.project_a1, "55"),
        payload_other=lambda w, _: api_split(w, w.p.program_b, w.p.project_b1, "65"),
        post_other="201 404 404 404 403 404 403",
    ),
    # Requests: the PI and the managers may ask for Detection; the researcher and finance may not.
    "api:approvalrequest-list": Decision(
        get=ALL_SIGNED_IN,
        post="201 201 201 403 403 404 403",
        payload=lambda w, _: api_request(w, w.p.program_a, w.p.project_a1, "55"),
        payload_other=lambda w, _: api_request(w, w.p.program_b, w.p.project_b1, "65"),
        post_other="201 404 404 404 403 404 403",
    ),
    # The PI's request is seen by the managers above it, its PI and finance — not by the
    # researcher (requests are not part of a member's read-only view).
    "api:approvalrequest-detail": Decision(
        url=_request_a,
        get="200 200 200 404 200 404 403",
        other=_request_b,
        get_other=ANOTHER_PROGRAM,
    ),
    # Deciding: managers of the parent, never the requester (the PI's own request: 403).
    "api:approvalrequest-approve": Decision(
        url=_request_a,
        get="405 405 405 405 405 405 403",
        post="200 200 403 404 403 404 403",
        payload=_comment,
        other=_request_b,
        get_other="405 405 405 405 405 405 403",
        post_other="200 404 404 404 403 404 403",
    ),
    "api:approvalrequest-reject": Decision(
        url=_request_a,
        get="405 405 405 405 405 405 403",
        post="200 200 403 404 403 404 403",
        payload=_comment,
        other=_request_b,
        get_other="405 405 405 405 405 405 403",
        post_other="200 404 404 404 403 404 403",
    ),
    # Withdrawing and submitting: the requester only.
    "api:approvalrequest-withdraw": Decision(
        url=_request_a,
        get="405 405 405 405 405 405 403",
        post="403 403 200 404 403 404 403",
        payload=_comment,
        other=_request_b,
        get_other="405 405 405 405 405 405 403",
        post_other="403 404 404 404 403 404 403",
    ),
    "api:approvalrequest-submit": Decision(
        url=lambda w: {"pk": w.draft_a.pk},
        get="405 405 405 405 405 405 403",
        post="403 403 200 404 403 404 403",
        other=lambda w: {"pk": w.draft_b.pk},
        get_other="405 405 405 405 405 405 403",
        post_other="403 404 404 404 403 404 403",
    ),
    # --- Scheduler API (scheduler/api/): workloads, nodes, agent tokens -------------------
    # Submitting needs membership of the project (PI or researcher); anyone else, even an
    # org admin, gets a 400 naming ``project`` (the scheduler API's choice: no existence leak).
    "api:workload-list": Decision(
        get=ALL_SIGNED_IN,
        post="400 400 201 201 400 400 403",
        payload=lambda w, _: workload_body(w.p.project_a1),
        payload_other=lambda w, _: workload_body(w.p.project_b1),
        post_other="400 400 400 400 400 400 403",
    ),
    # A sweep: the same membership rule, every item named by index when refused.
    "api:workload-bulk": Decision(
        get="405 405 405 405 405 405 403",
        post="400 400 201 201 400 400 403",
        payload=lambda w, _: {"workloads": [workload_body(w.p.project_a1)] * 2},
        payload_other=lambda w, _: {"workloads": [workload_body(w.p.project_b1)] * 2},
        post_other="400 400 400 400 400 400 403",
    ),
    "api:workload-detail": Decision(
        url=lambda w: {"pk": w.workload_a.pk},
        get=SEEN_BY_ORG,
        other=lambda w: {"pk": w.workload_b.pk},
        get_other=ANOTHER_PROGRAM,
    ),
    # Cancel: the submitter (the researcher), the project's PI, or an org admin.
    "api:workload-cancel": Decision(
        url=lambda w: {"pk": w.workload_a.pk},
        get="405 405 405 405 405 405 403",
        post="200 403 200 200 403 404 403",
        other=lambda w: {"pk": w.workload_b.pk},
        get_other="405 405 405 405 405 405 403",
        post_other="200 404 404 404 403 404 403",
    ),
    "api:node-list": Decision(get=ALL_SIGNED_IN),
    "api:node-detail": Decision(
        url=lambda w: {"pk": w.node_a.pk},
        get=SEEN_BY_ORG,
        other=lambda w: {"pk": w.node_foreign.pk},
        get_other=ANOTHER_ORG,
    ),
    **{
        f"api:node-{operation}": Decision(
            url=lambda w: {"pk": w.node_a.pk},
            get="405 405 405 405 405 405 403",
            post="200 403 403 403 403 404 403",  # org admins operate nodes
            payload=lambda w, _: {"reason": "Permission matrix."},
            other=lambda w: {"pk": w.node_foreign.pk},
            get_other="405 405 405 405 405 405 403",
            post_other=ANOTHER_ORG,
        )
        for operation in ("drain", "undrain", "mark-down", "bring-up")
    },
    # Agent tokens: listed and created by org admins of the cluster's organization only.
    "api:nodeagent-list": Decision(
        get=ALL_SIGNED_IN,
        post="201 403 403 403 403 404 403",
        payload=lambda w, _: {"cluster": w.p.cluster.pk, "name": "node-new"},
        payload_other=lambda w, _: {"cluster": w.foreign_cluster.pk, "name": "node-new"},
        post_other=ANOTHER_ORG,
    ),
    # The node agent protocol takes agent tokens only: no persona's session gets in (401),
    # before any id is looked up. Order and run ids are the agent's, not a persona's, so any
    # id serves; 1 and 2 name no particular object.
    **{
        f"api:agent-{name}": Decision(get=NO_PERSONA, post=NO_PERSONA)
        for name in ("register", "heartbeat", "orders-fetch", "utilization")
    },
    "api:agent-order-ack": Decision(
        url=lambda w: {"order_id": 1},
        get=NO_PERSONA,
        post=NO_PERSONA,
        other=lambda w: {"order_id": 2},
        get_other=NO_PERSONA,
        post_other=NO_PERSONA,
    ),
    "api:agent-run-exit": Decision(
        url=lambda w: {"run_id": 1},
        get=NO_PERSONA,
        post=NO_PERSONA,
        other=lambda w: {"run_id": 2},
        get_other=NO_PERSONA,
        post_other=NO_PERSONA,
    ),
    # --- Pages (sign-in required: the anonymous visitor is sent to the sign-in page) -----
    # Read-only pages answer POST like GET (they do not restrict methods).
    "home": Decision(get=PAGE_ALL_SIGNED_IN),
    # One cluster: straight to its tree; the outsider has none and gets the (empty) picker.
    "tree-index": Decision(get="302 302 302 302 302 200 login"),
    "tree": Decision(
        url=lambda w: {"cluster_id": w.p.cluster.pk},
        get=PAGE_SEEN_BY_ORG,
        other=lambda w: {"cluster_id": w.foreign_cluster.pk},
        get_other=PAGE_ANOTHER_ORG,
    ),
    # The split editor: managers save (302 to the tree), the PI sends a request (302 to it),
    # the researcher and finance see Vision but may neither change nor ask (403).
    "split": Decision(
        url=lambda w: {"cluster_id": w.p.cluster.pk, "kind": "program", "pk": w.p.program_a.pk},
        get="200 200 200 403 403 404 login",
        post="302 302 302 403 403 404 login",
        payload=lambda w, _: page_split(w.p.project_a1, "55", w.p.project_a2, "30"),
        other=lambda w: {"cluster_id": w.p.cluster.pk, "kind": "program", "pk": w.p.program_b.pk},
        get_other="200 404 404 404 403 404 login",
        post_other="302 404 404 404 403 404 login",
        payload_other=lambda w, _: page_split(w.p.project_b1, "65", w.p.project_b2, "30"),
    ),
    "history": Decision(
        url=lambda w: {"kind": "project", "pk": w.p.project_a1.pk},
        get=PAGE_SEEN_BY_ORG,
        other=lambda w: {"kind": "project", "pk": w.p.project_b1.pk},
        get_other=PAGE_ANOTHER_PROGRAM,
    ),
    "approval-inbox": Decision(get=PAGE_ALL_SIGNED_IN),
    "my-requests": Decision(get=PAGE_ALL_SIGNED_IN),
    "approval-detail": Decision(
        url=_request_a,
        get="200 200 200 404 200 404 login",
        other=_request_b,
        get_other=PAGE_ANOTHER_PROGRAM,
    ),
    "approval-approve": Decision(
        url=_request_a,
        get="405 405 405 405 405 405 login",
        post="302 302 403 404 403 404 login",
        payload=lambda w, _: {"approve-comment": "Matrix."},
        other=_request_b,
        get_other="405 405 405 405 405 405 login",
        post_other="302 404 404 404 403 404 login",
    ),
    "approval-reject": Decision(
        url=_request_a,
        get="405 405 405 405 405 405 login",
        post="302 302 403 404 403 404 login",
        payload=lambda w, _: {"reject-comment": "Matrix."},
        other=_request_b,
        get_other="405 405 405 405 405 405 login",
        post_other="302 404 404 404 403 404 login",
    ),
    # --- Dashboards: every signed-in user; each sees only their part of the tree (the outsider
    # gets an explained empty page).
    "dashboards:index": Decision(get="302 302 302 302 302 302 login"),
    "dashboards:delivery": Decision(get=PAGE_ALL_SIGNED_IN),
    "dashboards:fairshare": Decision(get=PAGE_ALL_SIGNED_IN),
    "dashboards:health": Decision(get=PAGE_ALL_SIGNED_IN),
    # --- Finance usage report: finance and org admins read; nobody writes.
    "reports:usage": Decision(get="200 403 403 403 200 403 login"),
    "reports:usage-csv": Decision(get="200 403 403 403 200 403 login"),
    "reports:usage-xlsx": Decision(get="200 403 403 403 200 403 login"),
    # --- Live scheduler pages -----------------------------------------------------------
    # Everyone signed in may open the lists; they show only what the visibility selector allows
    # (the outsider gets an empty page).
    "scheduler:nodes": Decision(get=PAGE_ALL_SIGNED_IN),
    "scheduler:workloads": Decision(get=PAGE_ALL_SIGNED_IN),
    # A node's page: whoever sees its cluster; a node of another organization does not exist.
    "scheduler:node-detail": Decision(
        url=lambda w: {"pk": w.node_a.pk},
        get="200 200 200 200 200 404 login",
        post="405 405 405 405 405 405 login",
        other=lambda w: {"pk": w.node_foreign.pk},
        get_other="404 404 404 404 404 404 login",
        post_other="405 405 405 405 405 405 login",
    ),
    # Operator actions: org admins only (GET is the confirmation page); a node of another
    # organization does not exist for them.
    "scheduler:node-action": Decision(
        url=lambda w: {"pk": w.node_a.pk, "action": "drain"},
        get="200 403 403 403 403 404 login",
        post="302 403 403 403 403 404 login",
        other=lambda w: {"pk": w.node_foreign.pk, "action": "drain"},
        get_other="404 404 404 404 404 404 login",
        post_other="404 404 404 404 404 404 login",
    ),
    "scheduler:workload-detail": Decision(
        url=lambda w: {"pk": w.workload_a.pk},
        get=PAGE_SEEN_BY_ORG,
        other=lambda w: {"pk": w.workload_b.pk},
        get_other=PAGE_ANOTHER_PROGRAM,
    ),
    # Cancel: the submitter, the project's PI or an org admin; others who see it get 403.
    # GET is the confirmation page.
    "scheduler:workload-cancel": Decision(
        url=lambda w: {"pk": w.workload_a.pk},
        get="200 403 200 200 403 404 login",
        post="302 403 302 302 403 404 login",
        other=lambda w: {"pk": w.workload_b.pk},
        get_other="200 404 404 404 403 404 login",
        post_other="302 404 404 404 403 404 login",
    ),
    # Submitting: members and PIs of a project only (the form, on its own page, lists theirs).
    "scheduler:workload-submit": Decision(
        get="403 403 200 200 403 403 login",
        post="403 403 302 302 403 403 login",
        payload=lambda w, _: {
            "project": w.p.project_a1.pk,
            "cluster": w.p.cluster.pk,
            "name": "matrix",
            "gpus": 1,
            "nodes": 1,
            "min_runtime_minutes": 10,
            "command": "true",
        },
    ),
    # The simulator: program managers and org admins; jobs seen by their creator and the
    # org admins of the job's organization (everyone else: it does not exist).
    "scheduler:simulator": Decision(get="200 200 403 403 403 403 login"),
    "scheduler:simulation-create": Decision(
        get="405 405 405 405 405 405 login",
        post="302 302 403 403 403 403 login",
        payload=lambda w, _: {
            "trace_source": "philly",
            "gpus": 512,
            "gpus_per_node": 8,
            "budgets": "proportional",
            "policies": ["fairshare"],
            "start_day": 20,
            "days": 14,
        },
    ),
    # What-if: a preview of a split or of a request, by whoever may make or see the change.
    "scheduler:whatif-detail": Decision(
        url=lambda w: {
            "pk": _whatif(w.p.program_manager, w.p.cluster, "program", w.p.program_a.pk).pk
        },
        get="200 200 404 404 404 404 login",
        other=lambda w: {
            "pk": _whatif(w.pi_b, w.foreign_cluster, "organization", w.foreign_organization.pk).pk
        },
        get_other=PAGE_ANOTHER_ORG,
    ),
    "scheduler:whatif-request": Decision(
        url=_request_a,
        get="405 405 405 405 405 405 login",
        post="302 302 302 404 403 404 login",
        other=_request_b,
        get_other="405 405 405 405 405 405 login",
        post_other="302 404 404 404 403 404 login",
    ),
    "api:what-if": Decision(
        get="405 405 405 405 405 405 403",
        post="202 202 202 403 403 404 403",
        payload=lambda w, _: api_whatif(w, w.p.program_a, w.p.project_a1, "55"),
        payload_other=lambda w, _: api_whatif(w, w.p.program_b, w.p.project_b1, "65"),
        post_other="202 404 404 404 403 404 403",
    ),
    "api:what-if-detail": Decision(
        url=lambda w: {
            "pk": _whatif(w.p.program_manager, w.p.cluster, "program", w.p.program_a.pk).pk
        },
        get="200 200 404 404 404 404 403",
        other=lambda w: {
            "pk": _whatif(w.pi_b, w.foreign_cluster, "organization", w.foreign_organization.pk).pk
        },
        get_other=ANOTHER_ORG,
    ),
    "scheduler:simulation-detail": Decision(
        url=lambda w: {"pk": _simulation(w.p.program_manager, w.p.organization).pk},
        get="200 200 404 404 404 404 login",
        other=lambda w: {"pk": _simulation(w.pi_b, w.foreign_organization).pk},
        get_other="404 404 404 404 404 404 login",
    ),
    "approval-withdraw": Decision(
        url=_request_a,
        get="405 405 405 405 405 405 login",
        post="403 403 302 404 403 404 login",
        payload=lambda w, _: {"withdraw-comment": ""},
        other=_request_b,
        get_other="405 405 405 405 405 405 login",
        post_other="403 404 404 404 403 404 login",
    ),
    # --- Audit trail and roles (governance/api/audit.py, views/audit.py, views/roles.py) ---
    # The audit trail: org admins only, their organization's events (another org's: 404).
    "api:auditevent-list": Decision(get="200 403 403 403 403 403 403"),
    "api:auditevent-detail": Decision(
        url=lambda w: {"pk": _audit_event(w.p.organization).pk},
        get="200 403 403 403 403 403 403",
        other=lambda w: {"pk": _audit_event(w.foreign_organization).pk},
        get_other="404 403 403 403 403 403 403",
    ),
    "audit:events": Decision(get="200 403 403 403 403 403 login"),
    "audit:export": Decision(get="200 403 403 403 403 403 login"),
    # Roles: org admins manage every role of their org; program managers PI and researcher
    # roles on their program's projects (Translation is not theirs: 404); others 403.
    "api:roleassignment-list": Decision(
        get="200 200 403 403 403 403 403",
        post="201 201 403 403 403 403 403",
        payload=lambda w, _: _api_grant(w.p.project_a1),
        payload_other=lambda w, _: _api_grant(w.p.project_b1),
        post_other="201 404 403 403 403 403 403",
    ),
    "api:roleassignment-detail": Decision(
        url=_researcher_role,
        get="200 200 403 403 403 403 403",
        other=_pi_b_role,
        get_other="200 404 403 403 403 403 403",
    ),
    "api:roleassignment-revoke": Decision(
        url=_researcher_role,
        get="405 405 405 405 405 405 403",
        post="204 204 403 403 403 403 403",
        payload=lambda w, _: {"reason": "Permission matrix."},
        other=_pi_b_role,
        get_other="405 405 405 405 405 405 403",
        post_other="204 404 403 403 403 403 403",
    ),
    "people:roles": Decision(
        get="200 200 403 403 403 403 login",
        post="302 302 403 403 403 403 login",
        payload=lambda w, _: {
            "username": "outsider",
            "grant": f"researcher@project:{w.p.project_a1.pk}",
            "reason": "Permission matrix.",
        },
    ),
    "people:revoke": Decision(
        url=_researcher_role,
        get="405 405 405 405 405 405 login",
        post="302 302 403 403 403 403 login",
        other=_pi_b_role,
        get_other="405 405 405 405 405 405 login",
        post_other="302 404 403 403 403 403 login",
    ),
    # Notifications: each person's own only; the matrix's notice is the org admin's (the PI's
    # submitted request awaits their decision). Another person's is a 404 (API) or changes
    # nothing (pages, which go back to the list).
    "api:notification-list": Decision(get=ALL_SIGNED_IN),
    "api:notification-preferences": Decision(get=ALL_SIGNED_IN),
    "organization-webhook": Decision(
        get="200 403 403 403 403 403 login",
        post="302 403 403 403 403 403 login",
        payload=lambda w, _: {"url": "http://127.0.0.1:9/matrix", "enabled": ""},
    ),
    "api:notification-read": Decision(
        url=_org_admin_notice,
        get="405 405 405 405 405 405 403",
        post="200 404 404 404 404 404 403",
        other=_pi_b_notice,
        get_other="405 405 405 405 405 405 403",
        post_other="404 404 404 404 404 404 403",
    ),
    "api:notification-read-all": Decision(
        get="405 405 405 405 405 405 403", post="200 200 200 200 200 200 403"
    ),
    "notifications": Decision(get=PAGE_ALL_SIGNED_IN),
    "notifications-read": Decision(
        get="405 405 405 405 405 405 login", post="302 302 302 302 302 302 login"
    ),
    "notification-open": Decision(
        url=_org_admin_notice,
        get="405 405 405 405 405 405 login",
        post="302 302 302 302 302 302 login",
        other=_pi_b_notice,
        get_other="405 405 405 405 405 405 login",
        post_other="302 302 302 302 302 302 login",
    ),
    "notification-preferences": Decision(
        get=PAGE_ALL_SIGNED_IN,
        post="302 302 302 302 302 302 login",
        payload=lambda w, _: dict.fromkeys(NotificationKind.values, "off"),
    ),
    # A mail's stop link: whoever holds the signed link (no session: mail clients post it).
    "notifications-unsubscribe": Decision(
        url=lambda w: {"token": unsubscribe_token(user=w.p.org_admin, kind="approval_awaiting")},
        get="200 200 200 200 200 200 200",
        post="200 200 200 200 200 200 200",
        other=lambda w: {"token": unsubscribe_token(user=w.pi_b, kind="approval_decided")},
        get_other="200 200 200 200 200 200 200",
        post_other="200 200 200 200 200 200 200",
    ),
    # Forced preemption: operators (org admins) only. The matrix's workloads are pending, so
    # the org admin's call is refused on ``state`` (400; the page redirects with the message).
    "api:workload-preempt": Decision(
        url=lambda w: {"pk": w.workload_a.pk},
        get="405 405 405 405 405 405 403",
        post="400 403 403 403 403 404 403",
        payload=lambda w, _: {"reason": "Permission matrix."},
        other=lambda w: {"pk": w.workload_b.pk},
        get_other="405 405 405 405 405 405 403",
        post_other="400 404 404 404 403 404 403",
    ),
    "scheduler:workload-preempt": Decision(
        url=lambda w: {"pk": w.workload_a.pk},
        get="405 405 405 405 405 405 login",
        post="302 403 403 403 403 404 login",
        payload=lambda w, _: {"reason": "Permission matrix.", "confirm": "yes"},
        other=lambda w: {"pk": w.workload_b.pk},
        get_other="405 405 405 405 405 405 login",
        post_other="302 404 404 404 403 404 login",
    ),
}


# --- Walking the URL configuration ---------------------------------------------------------


@dataclass(frozen=True)
class Route:
    name: str
    route: str
    takes_ids: bool
    callback: Callable


def _walk(patterns, prefix: str = "", namespace: str = "", groups: int = 0):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        own_groups = groups + len(pattern.pattern.regex.groupindex)
        if isinstance(pattern, URLResolver):
            ns = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _walk(pattern.url_patterns, route, ns, own_groups)
        elif isinstance(pattern, URLPattern):
            yield Route(
                name=f"{namespace}{pattern.name}" if pattern.name else f"<unnamed {route}>",
                route=route,
                takes_ids=own_groups > 0,
                callback=pattern.callback,
            )


def _skipped(route: str) -> bool:
    plain = route.replace("^", "")
    return any(plain.startswith(prefix) for prefix in SKIPPED)


def collect_routes() -> dict[str, Route]:
    """Every route of the URL configuration outside ``SKIPPED``, by name."""
    return {r.name: r for r in _walk(get_resolver().url_patterns) if not _skipped(r.route)}


ROUTES = collect_routes()


# --- Running one route -----------------------------------------------------------------------


def outcome(response) -> str:
    """The matrix's word for a response: its status, or ``login`` for a sign-in redirect."""
    if response.status_code == 302:
        login = resolve_url(settings.LOGIN_URL)
        return "login" if response["Location"].startswith(login) else "302"
    return str(response.status_code)


def _call(client, method: str, url: str, body: dict | None, is_api: bool):
    with transaction.atomic():
        if method == "GET":
            response = client.get(url)
        elif is_api:
            response = client.post(url, body or {}, format="json")
        else:
            response = client.post(url, body or {})
        transaction.set_rollback(True)  # the next persona sees the same world
    return response


def _expected_post(declared: str | None, get_expected: str) -> str:
    if declared is None:
        return " ".join(["405"] * len(PERSONA_NAMES) + [get_expected.split()[-1]])
    if declared == SAME_AS_GET:
        return get_expected
    return declared


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_route_answers_each_persona_as_declared(name, world):
    route = ROUTES[name]
    if name not in DECISIONS:
        pytest.fail(
            f"add a permission decision for route {name} ({route.route}) to DECISIONS in "
            f"{__name__}: what do {', '.join(COLUMNS)} get for GET and POST?",
            pytrace=False,
        )
    decision = DECISIONS[name]
    if route.takes_ids:
        assert decision.url and decision.other, (
            f"route {name} takes ids: give url= (the personas' own object) and other= (another "
            "program's or organization's object, for the cross-tenant check)"
        )

    variants = [("own", decision.url, decision.get, decision.post, decision.payload)]
    if decision.other or decision.payload_other:
        post_other = decision.post_other
        if decision.post in (None, SAME_AS_GET):
            post_other = decision.post
        assert post_other is not None or decision.post is None, (
            f"route {name} accepts POST: declare post_other for the cross-tenant object"
        )
        variants.append(
            (
                "other",
                decision.other or decision.url,
                decision.get_other or decision.get,
                post_other,
                decision.payload_other or decision.payload,
            )
        )

    clients = {}
    for column in COLUMNS:
        client = APIClient()
        if column != "anonymous":
            client.force_login(world.p.users[column])
        clients[column] = client

    mismatches = []
    for variant, kwargs_of, get_expected, post_declared, payload in variants:
        assert get_expected, f"route {name}: declare get_{variant}"
        url = reverse(name, kwargs=kwargs_of(world) if kwargs_of else None)
        checks = [("GET", get_expected), ("POST", _expected_post(post_declared, get_expected))]
        for method, expected_line in checks:
            expected = expected_line.split()
            assert len(expected) == len(COLUMNS), f"{name} {method}: {len(COLUMNS)} outcomes"
            for column, want in zip(COLUMNS, expected, strict=True):
                body = payload(world, column) if payload and method == "POST" else None
                got = outcome(_call(clients[column], method, url, body, name.startswith("api:")))
                if got != want:
                    mismatches.append(f"{method} {url} ({variant}) as {column}: {got}, want {want}")
    assert not mismatches, f"route {name}:\n" + "\n".join(mismatches)


def test_every_decision_names_a_route_that_exists():
    stale = sorted(set(DECISIONS) - set(ROUTES))
    assert not stale, f"DECISIONS lists routes that no longer exist: {stale}"


def test_the_matrix_covers_pages_and_api():
    names = set(ROUTES)
    assert any(n.startswith("api:") for n in names)
    assert "home" in names
    assert not any(n.startswith("<unnamed") for n in names), "name every route"
