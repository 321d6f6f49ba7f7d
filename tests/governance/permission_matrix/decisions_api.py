"""The permission decisions of the API routes (governance and scheduler)."""

from __future__ import annotations

from tests.governance.permission_matrix.decision import (
    ALL_SIGNED_IN,
    ANOTHER_ORG,
    ANOTHER_PROGRAM,
    NO_PERSONA,
    SEEN_BY_ORG,
    Decision,
)
from tests.governance.permission_matrix.payloads import (
    api_request,
    api_split,
    comment_body,
    program_a,
    program_b,
    project_a1,
    project_b1,
    request_a,
    request_b,
    token_payload,
    workload_body,
)

API_DECISIONS: dict[str, Decision] = {
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
        url=program_a, get=SEEN_BY_ORG, other=program_b, get_other=ANOTHER_PROGRAM
    ),
    "api:program-history": Decision(
        url=program_a, get=SEEN_BY_ORG, other=program_b, get_other=ANOTHER_PROGRAM
    ),
    "api:project-list": Decision(get=ALL_SIGNED_IN),
    "api:project-detail": Decision(
        url=project_a1, get=SEEN_BY_ORG, other=project_b1, get_other=ANOTHER_PROGRAM
    ),
    "api:project-history": Decision(
        url=project_a1, get=SEEN_BY_ORG, other=project_b1, get_other=ANOTHER_PROGRAM
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
        url=request_a,
        get="200 200 200 404 200 404 403",
        other=request_b,
        get_other=ANOTHER_PROGRAM,
    ),
    # Deciding: managers of the parent, never the requester (the PI's own request: 403).
    "api:approvalrequest-approve": Decision(
        url=request_a,
        get="405 405 405 405 405 405 403",
        post="200 200 403 404 403 404 403",
        payload=comment_body,
        other=request_b,
        get_other="405 405 405 405 405 405 403",
        post_other="200 404 404 404 403 404 403",
    ),
    "api:approvalrequest-reject": Decision(
        url=request_a,
        get="405 405 405 405 405 405 403",
        post="200 200 403 404 403 404 403",
        payload=comment_body,
        other=request_b,
        get_other="405 405 405 405 405 405 403",
        post_other="200 404 404 404 403 404 403",
    ),
    # Withdrawing and submitting: the requester only.
    "api:approvalrequest-withdraw": Decision(
        url=request_a,
        get="405 405 405 405 405 405 403",
        post="403 403 200 404 403 404 403",
        payload=comment_body,
        other=request_b,
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
}
