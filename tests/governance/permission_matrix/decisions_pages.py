"""The permission decisions of the pages, and of the API routes of the features declared beside
their pages (what-if, simulator, audit trail, roles, notifications, forced preemption)."""

from __future__ import annotations

from governance.choices import NotificationKind
from governance.services.notification_mail import unsubscribe_token
from tests.governance.permission_matrix.decision import (
    ALL_SIGNED_IN,
    ANOTHER_ORG,
    PAGE_ALL_SIGNED_IN,
    PAGE_ANOTHER_ORG,
    PAGE_ANOTHER_PROGRAM,
    PAGE_SEEN_BY_ORG,
    Decision,
)
from tests.governance.permission_matrix.payloads import (
    api_grant,
    api_whatif,
    audit_event_of,
    org_admin_notice,
    page_split,
    pi_b_notice,
    pi_b_role,
    request_a,
    request_b,
    researcher_role,
    simulation_job,
    whatif_run,
)

PAGE_DECISIONS: dict[str, Decision] = {
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
        url=request_a,
        get="200 200 200 404 200 404 login",
        other=request_b,
        get_other=PAGE_ANOTHER_PROGRAM,
    ),
    "approval-approve": Decision(
        url=request_a,
        get="405 405 405 405 405 405 login",
        post="302 302 403 404 403 404 login",
        payload=lambda w, _: {"approve-comment": "Matrix."},
        other=request_b,
        get_other="405 405 405 405 405 405 login",
        post_other="302 404 404 404 403 404 login",
    ),
    "approval-reject": Decision(
        url=request_a,
        get="405 405 405 405 405 405 login",
        post="302 302 403 404 403 404 login",
        payload=lambda w, _: {"reject-comment": "Matrix."},
        other=request_b,
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
            "pk": whatif_run(w.p.program_manager, w.p.cluster, "program", w.p.program_a.pk).pk
        },
        get="200 200 404 404 404 404 login",
        other=lambda w: {
            "pk": whatif_run(
                w.pi_b, w.foreign_cluster, "organization", w.foreign_organization.pk
            ).pk
        },
        get_other=PAGE_ANOTHER_ORG,
    ),
    "scheduler:whatif-request": Decision(
        url=request_a,
        get="405 405 405 405 405 405 login",
        post="302 302 302 404 403 404 login",
        other=request_b,
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
            "pk": whatif_run(w.p.program_manager, w.p.cluster, "program", w.p.program_a.pk).pk
        },
        get="200 200 404 404 404 404 403",
        other=lambda w: {
            "pk": whatif_run(
                w.pi_b, w.foreign_cluster, "organization", w.foreign_organization.pk
            ).pk
        },
        get_other=ANOTHER_ORG,
    ),
    "scheduler:simulation-detail": Decision(
        url=lambda w: {"pk": simulation_job(w.p.program_manager, w.p.organization).pk},
        get="200 200 404 404 404 404 login",
        other=lambda w: {"pk": simulation_job(w.pi_b, w.foreign_organization).pk},
        get_other="404 404 404 404 404 404 login",
    ),
    "approval-withdraw": Decision(
        url=request_a,
        get="405 405 405 405 405 405 login",
        post="403 403 302 404 403 404 login",
        payload=lambda w, _: {"withdraw-comment": ""},
        other=request_b,
        get_other="405 405 405 405 405 405 login",
        post_other="403 404 404 404 403 404 login",
    ),
    # --- Audit trail and roles (governance/api/audit.py, views/audit.py, views/roles.py) ---
    # The audit trail: org admins only, their organization's events (another org's: 404).
    "api:auditevent-list": Decision(get="200 403 403 403 403 403 403"),
    "api:auditevent-detail": Decision(
        url=lambda w: {"pk": audit_event_of(w.p.organization).pk},
        get="200 403 403 403 403 403 403",
        other=lambda w: {"pk": audit_event_of(w.foreign_organization).pk},
        get_other="404 403 403 403 403 403 403",
    ),
    "audit:events": Decision(get="200 403 403 403 403 403 login"),
    "audit:export": Decision(get="200 403 403 403 403 403 login"),
    # Roles: org admins manage every role of their org; program managers PI and researcher
    # roles on their program's projects (Translation is not theirs: 404); others 403.
    "api:roleassignment-list": Decision(
        get="200 200 403 403 403 403 403",
        post="201 201 403 403 403 403 403",
        payload=lambda w, _: api_grant(w.p.project_a1),
        payload_other=lambda w, _: api_grant(w.p.project_b1),
        post_other="201 404 403 403 403 403 403",
    ),
    "api:roleassignment-detail": Decision(
        url=researcher_role,
        get="200 200 403 403 403 403 403",
        other=pi_b_role,
        get_other="200 404 403 403 403 403 403",
    ),
    "api:roleassignment-revoke": Decision(
        url=researcher_role,
        get="405 405 405 405 405 405 403",
        post="204 204 403 403 403 403 403",
        payload=lambda w, _: {"reason": "Permission matrix."},
        other=pi_b_role,
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
        url=researcher_role,
        get="405 405 405 405 405 405 login",
        post="302 302 403 403 403 403 login",
        other=pi_b_role,
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
        url=org_admin_notice,
        get="405 405 405 405 405 405 403",
        post="200 404 404 404 404 404 403",
        other=pi_b_notice,
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
        url=org_admin_notice,
        get="405 405 405 405 405 405 login",
        post="302 302 302 302 302 302 login",
        other=pi_b_notice,
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
