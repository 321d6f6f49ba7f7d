"""``manage.py load_demo``: builds the Philly demo from the bundled files, idempotently."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.utils import timezone

from governance.choices import ApprovalState, AuditAction, DecisionAction, Role
from governance.models import (
    Allocation,
    ApprovalDecision,
    ApprovalRequest,
    AuditEvent,
    Cluster,
    Organization,
    Program,
    Project,
    RoleAssignment,
)
from governance.selectors.approvals import approval_inbox
from governance.selectors.tree import share_at
from governance.selectors.visibility import user_visibility
from scheduler.traces import PHILLY_BUDGETS

pytestmark = pytest.mark.django_db

ACCOUNTS = ["admin", "manager", "pi", "researcher", "finance", "outsider"]


def load_demo(*args) -> str:
    out = StringIO()
    call_command("load_demo", *args, stdout=out)
    return out.getvalue()


def snapshot() -> dict:
    from django.contrib.auth import get_user_model

    return {
        model.__name__: sorted(map(repr, model.objects.values()))
        for model in (
            Organization,
            Program,
            Project,
            Cluster,
            RoleAssignment,
            Allocation,
            ApprovalRequest,
            ApprovalDecision,
            get_user_model(),
        )
    }


def test_demo_builds_the_philly_tree_on_one_h100_cluster():
    load_demo()
    organization = Organization.objects.get()
    assert organization.name == "Philly Research"
    cluster = Cluster.objects.get()
    assert (cluster.name, cluster.nodes, cluster.gpus_per_node) == ("h100", 32, 8)
    assert sorted(Program.objects.values_list("slug", flat=True)) == [
        "language",
        "speech",
        "vision",
    ]
    assert Project.objects.count() == 11
    vc = Project.objects.get(slug="6214e9")
    assert (vc.name, vc.cost_centre, vc.program.slug) == ("VC 6214e9", "CC-6214", "vision")


def test_demo_shares_today_match_the_bundled_json():
    load_demo()
    cluster = Cluster.objects.get()
    tree = json.loads(PHILLY_BUDGETS.read_text())
    for program_spec in tree["children"]:
        program = Program.objects.get(slug=program_spec["name"])
        assert share_at(node=program, cluster=cluster) == Decimal(str(program_spec["share"]))
        for project_spec in program_spec["children"]:
            project = Project.objects.get(slug=project_spec["name"])
            expected = Decimal(str(project_spec["share"]))
            assert share_at(node=project, cluster=cluster) == expected, project.slug


def test_running_the_demo_twice_changes_nothing():
    load_demo()
    before = snapshot()
    out = load_demo()
    assert "nothing changed" in out
    assert snapshot() == before


def test_reset_rebuilds_the_demo():
    load_demo()
    load_demo("--reset")
    assert Organization.objects.count() == 1
    assert ApprovalRequest.objects.count() == 3


def test_demo_prints_every_account_with_a_password_that_signs_in():
    out = load_demo()
    lines = [line for line in out.splitlines() if line.startswith("  | ")]
    rows = [[cell.strip() for cell in line.strip(" |").split(" | ")] for line in lines]
    printed = {row[0]: row[1] for row in rows}
    assert set(ACCOUNTS) <= set(printed)
    for username in ACCOUNTS:
        assert authenticate(username=username, password=printed[username]), username


def test_demo_accounts_hold_one_persona_each():
    load_demo()
    roles = {
        username: {a.role for a in RoleAssignment.objects.filter(user__username=username)}
        for username in ACCOUNTS
    }
    assert roles == {
        "admin": {Role.ORG_ADMIN},
        "manager": {Role.PROGRAM_MANAGER},
        "pi": {Role.PI},
        "researcher": {Role.RESEARCHER},
        "finance": {Role.FINANCE},
        "outsider": set(),
    }
    manager_role = RoleAssignment.objects.get(user__username="manager")
    assert manager_role.program.slug == "vision"
    assert RoleAssignment.objects.get(user__username="pi").project.slug == "6214e9"
    admin = RoleAssignment.objects.get(user__username="admin").user
    assert admin.is_staff and admin.is_superuser
    outsider = RoleAssignment.objects.model._meta.get_field("user").related_model.objects.get(
        username="outsider"
    )
    assert user_visibility(user=outsider).is_empty


def test_demo_has_a_waiting_an_applied_and_a_rejected_request():
    load_demo()
    states = sorted(ApprovalRequest.objects.values_list("state", flat=True))
    assert states == [ApprovalState.APPLIED, ApprovalState.REJECTED, ApprovalState.SUBMITTED]
    waiting = ApprovalRequest.objects.get(state=ApprovalState.SUBMITTED)
    assert waiting.requested_by.username == "pi"
    manager = RoleAssignment.objects.get(user__username="manager").user
    assert list(approval_inbox(user=manager)) == [waiting]
    applied = ApprovalRequest.objects.get(state=ApprovalState.APPLIED)
    assert applied.allocations.count() == 1


def test_the_demo_approval_history_happened_weeks_and_days_ago_with_matching_audit():
    loaded = timezone.now()
    load_demo()
    day = timedelta(days=1)
    rejected = ApprovalRequest.objects.get(state=ApprovalState.REJECTED)
    applied = ApprovalRequest.objects.get(state=ApprovalState.APPLIED)
    waiting = ApprovalRequest.objects.get(state=ApprovalState.SUBMITTED)
    rejected_at = rejected.decisions.get(action=DecisionAction.REJECT).at
    approved_at = applied.decisions.get(action=DecisionAction.APPROVE).at
    assert loaded - 22 * day < rejected.created_at < rejected_at < loaded - 14 * day
    assert rejected_at < applied.created_at < approved_at < loaded - 7 * day
    assert approved_at < waiting.created_at < loaded
    # The approved share holds from the moment of the approval, which applied it.
    allocation = applied.allocations.get()
    assert allocation.valid_from == allocation.created_at == approved_at
    assert applied.decisions.get(action=DecisionAction.APPLY).at == approved_at
    # The audit trail tells the same story at the same moments.
    events = AuditEvent.objects.filter(object_kind="approval_request")
    assert events.get(action=AuditAction.APPROVAL_REJECTED, object_id=rejected.pk).at == rejected_at
    assert events.get(action=AuditAction.APPROVAL_APPROVED, object_id=applied.pk).at == approved_at
    changes = list(AuditEvent.objects.filter(action=AuditAction.SHARE_CHANGE).order_by("at"))
    assert changes[-1].at == approved_at
    # The initial split (organization, then each program) is there too, at its own date.
    initial = Allocation.objects.filter(approval_request__isnull=True)
    assert {e.at for e in changes[:-1]} == set(initial.values_list("valid_from", flat=True))
    assert len(changes) - 1 == 1 + Program.objects.count()


def test_demo_admin_browses_allocations_in_the_django_admin_but_cannot_edit_them(client):
    load_demo()
    client.login(username="admin", password="budget-admin-h100")
    allocation = Allocation.objects.first()
    assert client.get("/admin/governance/allocation/").status_code == 200
    assert client.get("/admin/governance/allocation/add/").status_code == 403
    change_page = client.get(f"/admin/governance/allocation/{allocation.pk}/change/")
    assert change_page.status_code == 200
    assert b'name="percent"' not in change_page.content  # shown, not editable
    delete = client.post(f"/admin/governance/allocation/{allocation.pk}/delete/", {"post": "yes"})
    assert delete.status_code == 403
    assert Allocation.objects.filter(pk=allocation.pk).exists()


def test_demo_accounts_without_staff_status_cannot_open_the_admin(client):
    load_demo()
    client.login(username="manager", password="vision-manager-h100")
    response = client.get("/admin/governance/allocation/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
