"""What the matrix calls each route with: the URL ids of the personas' own objects and of
another tenant's, and the bodies of POSTs."""

from __future__ import annotations

from governance.models import Notification
from tests.governance.permission_matrix.world import World


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


def org_admin_notice(w):
    return {"pk": Notification.objects.filter(recipient=w.p.org_admin).first().pk}


def pi_b_notice(w):
    notice, _ = Notification.objects.get_or_create(
        recipient=w.pi_b,
        event_key="matrix",
        defaults={"kind": "approval_decided", "title": "Your request was approved"},
    )
    return {"pk": notice.pk}


def program_a(w):
    return {"pk": w.p.program_a.pk}


def program_b(w):
    return {"pk": w.p.program_b.pk}


def project_a1(w):
    return {"pk": w.p.project_a1.pk}


def project_b1(w):
    return {"pk": w.p.project_b1.pk}


def whatif_run(user, cluster, parent_kind, parent_id):
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


def request_a(w):
    return {"pk": w.request_a.pk}


def request_b(w):
    return {"pk": w.request_b.pk}


def simulation_job(user, organization):
    """A finished-or-not simulation job of ``user`` in ``organization`` (no run needed)."""
    from django.utils import timezone

    from scheduler.models import SimulationJob

    job, _ = SimulationJob.objects.get_or_create(
        created_by=user,
        organization=organization,
        defaults={"trace_source": "philly", "parameters": {}, "created_at": timezone.now()},
    )
    return job


def comment_body(w, persona):
    return {"comment": "Permission matrix."}


def audit_event_of(organization):
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


def researcher_role(w):
    from governance.models import RoleAssignment

    return {"pk": RoleAssignment.objects.get(user=w.p.researcher, project=w.p.project_a1).pk}


def pi_b_role(w):
    from governance.models import RoleAssignment

    return {"pk": RoleAssignment.objects.get(user=w.pi_b, project=w.p.project_b1).pk}


def api_grant(project) -> dict:
    """Make the outsider a researcher of ``project``."""
    return {
        "user": "outsider",
        "role": "researcher",
        "scope": {"kind": "project", "id": project.pk},
        "reason": "Permission matrix.",
    }
