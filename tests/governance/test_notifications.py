"""The notification centre: who is told what (and what not), once per event, bursts folded;
the bell, the page and the API."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from governance.choices import NotificationKind
from governance.models import Notification
from governance.services.approvals import (
    approval_approve,
    approval_reject,
    approval_request_create,
    approval_withdraw,
)
from governance.services.notifications import BURST_WINDOW
from scheduler.choices import RunEndReason, WorkloadState
from scheduler.models import Node, Run
from scheduler.services.runs import run_end
from tests.personas import build_personas
from tests.scheduler.agent_api import started_run
from tests.scheduler.test_api_workloads import make_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def p(db):
    world = build_personas()
    world.node = Node.objects.create(cluster=world.cluster, name="gpu-1", gpus=8)
    return world


def notices(user, **filters):
    return list(Notification.objects.filter(recipient=user, **filters).order_by("id"))


def pi_request(p, **kwargs):
    return approval_request_create(
        actor=p.pi, parent=p.program_a, cluster=p.cluster,
        percents={p.project_a1: Decimal("55")},
        reason="Two students start.", **kwargs,
    )  # fmt: skip


# --- approvals --------------------------------------------------------------------------------


def test_a_submitted_request_tells_its_deciders_and_not_the_requester(p):
    request = pi_request(p)
    awaiting = {n.recipient.username for n in Notification.objects.all()}
    assert awaiting == {"org_admin", "program_manager"}
    note = notices(p.program_manager)[0]
    assert note.kind == NotificationKind.APPROVAL_AWAITING
    assert note.link == f"/requests/{request.pk}/"
    assert "awaits your decision" in note.title and "Two students start." in note.body
    for persona in ("pi", "researcher", "finance", "outsider"):
        assert notices(p.users[persona]) == []


def test_a_decision_tells_the_requester_and_settles_the_other_deciders(p):
    request = pi_request(p)
    approval_approve(actor=p.program_manager, approval_request=request, comment="Fine.")
    told = notices(p.pi, kind=NotificationKind.APPROVAL_DECIDED)
    assert told[0].title.startswith(f"Your request #{request.pk}")
    assert "was approved by program_manager" in told[0].title
    assert told[0].body == "Fine."
    # Nobody else needs to act any more: the org admin's notice is read.
    assert all(n.read_at is not None for n in notices(p.org_admin))
    # Approved with an effective date of now: applied at once, and the requester told so
    # (once: not again as "a change of share affects your project").
    assert any("was applied" in n.title for n in told)
    assert notices(p.pi, kind=NotificationKind.SHARE_CHANGED) == []


def test_a_rejection_says_why_and_a_withdrawal_settles_the_deciders(p):
    first = pi_request(p)
    approval_reject(actor=p.org_admin, approval_request=first, comment="Not this month.")
    rejected = notices(p.pi, kind=NotificationKind.APPROVAL_DECIDED)
    assert len(rejected) == 1 and "was rejected by org_admin" in rejected[0].title
    assert rejected[0].body == "Not this month."
    second = pi_request(p)
    assert notices(p.program_manager, read_at__isnull=True)
    approval_withdraw(actor=p.pi, approval_request=second)
    assert notices(p.program_manager, read_at__isnull=True) == []


# --- workloads ---------------------------------------------------------------------------------


def preempted_run(p, *, by_project, submitter=None, min_runtime=3600, name="train"):
    victim = make_workload(
        p.project_a1, p.cluster, submitter or p.researcher, name=name, gpus=2,
        min_runtime_seconds=min_runtime,
    )  # fmt: skip
    preemptor = make_workload(
        by_project, p.cluster, None, name="urgent-debug", gpus=2, min_runtime_seconds=900
    )
    run = started_run(victim, p.node, by=preemptor)
    return victim, run


def test_a_preemption_names_a_preemptor_the_reader_may_see(p):
    _, run = preempted_run(p, by_project=p.project_a1)
    run_end(run=run, reason=RunEndReason.PREEMPTED)
    (note,) = notices(p.researcher)
    assert note.kind == NotificationKind.WORKLOAD_PREEMPTED
    assert note.title == (
        "“train” was preempted by “urgent-debug”, a debug-class workload of Detection; "
        "it is queued again"
    )


def test_a_preemption_by_another_project_does_not_name_it(p):
    _, run = preempted_run(p, by_project=p.project_b1)
    key = f"{p.program_b.slug}/{p.project_b1.slug}"
    run.stop_explanation = (
        f"preempted by {run.preempted_by_id} ({key}): project {key} is below its entitlement "
        "(2 of 8 GPUs) and reclaims from vision/detection, which runs above its own (10 of 8)"
    )
    run.save()
    run_end(run=run, reason=RunEndReason.PREEMPTED)
    (note,) = notices(p.researcher)
    assert "another project's debug-class workload" in note.title
    assert "another project is below its entitlement" in note.body
    assert p.project_b1.slug not in note.title + note.body
    assert "Translation" not in note.title + note.body


def test_each_ended_run_is_told_once(p):
    _, run = preempted_run(p, by_project=p.project_a1)
    run_end(run=run, reason=RunEndReason.PREEMPTED)
    run_end(run=run, reason=RunEndReason.PREEMPTED)  # a repeated report changes nothing
    assert len(notices(p.researcher)) == 1


def test_a_burst_of_preemptions_in_one_project_folds_into_one_notice(p):
    for i in range(5):
        _, run = preempted_run(p, by_project=p.project_a1, name=f"sweep-{i}")
        run_end(run=run, reason=RunEndReason.PREEMPTED)
    (note,) = notices(p.researcher)
    assert note.count == 5
    assert note.title == (
        "5 of your workloads in Detection were preempted or evicted and queued again"
    )
    assert "sweep-4" in note.body
    assert note.link == f"/workloads/?state=pending&project={p.project_a1.pk}&mine=1"
    # Read, the burst is over: the next preemption is a notice of its own.
    Notification.objects.update(read_at=timezone.now())
    _, run = preempted_run(p, by_project=p.project_a1, name="after")
    run_end(run=run, reason=RunEndReason.PREEMPTED)
    assert [n.count for n in notices(p.researcher)] == [5, 1]


def test_a_burst_ends_after_its_window(p):
    _, run = preempted_run(p, by_project=p.project_a1, name="early")
    long_ago = timezone.now() - BURST_WINDOW * 3
    Run.objects.filter(pk=run.pk).update(started_at=long_ago, accounted_until=long_ago)
    run.refresh_from_db()
    run_end(run=run, reason=RunEndReason.PREEMPTED, now=long_ago + BURST_WINDOW)
    _, run = preempted_run(p, by_project=p.project_a1, name="late")
    run_end(run=run, reason=RunEndReason.PREEMPTED)
    assert [n.count for n in notices(p.researcher)] == [1, 1]


def test_free_lane_preemptions_and_cancellations_are_not_told(p):
    _, run = preempted_run(p, by_project=p.project_a1, min_runtime=0)
    run_end(run=run, reason=RunEndReason.PREEMPTED)
    workload = make_workload(p.project_a1, p.cluster, p.researcher, name="gone", gpus=1)
    run = started_run(workload, p.node)
    workload.state = WorkloadState.CANCELLED
    workload.save()
    run_end(run=run, reason=RunEndReason.CANCELLED)
    assert notices(p.researcher) == []


def test_finished_and_failed_workloads_are_told_and_a_drain_says_so(p):
    done = make_workload(p.project_a1, p.cluster, p.researcher, name="done", gpus=1)
    run_end(run=started_run(done, p.node), reason=RunEndReason.SUCCEEDED, exit_code=0)
    broken = make_workload(p.project_a1, p.cluster, p.researcher, name="broken", gpus=1)
    run_end(run=started_run(broken, p.node), reason=RunEndReason.FAILED, exit_code=3)
    moved = make_workload(p.project_a1, p.cluster, p.researcher, name="moved", gpus=1)
    run_end(run=started_run(moved, p.node), reason=RunEndReason.DRAINED)
    titles = {n.kind: n.title for n in notices(p.researcher)}
    assert titles[NotificationKind.WORKLOAD_FINISHED] == "“done” finished in Detection"
    assert titles[NotificationKind.WORKLOAD_FAILED] == "“broken” failed in Detection (exit code 3)"
    assert titles[NotificationKind.WORKLOAD_PREEMPTED].startswith(
        "“moved” was stopped: its node is drained for repair"
    )


def test_a_submitter_who_lost_their_role_is_not_told(p):
    workload = make_workload(p.project_a1, p.cluster, p.researcher, name="x", gpus=1)
    p.researcher.roles.all().delete()
    run_end(run=started_run(workload, p.node), reason=RunEndReason.SUCCEEDED, exit_code=0)
    assert notices(p.researcher) == []


# --- the bell, the page, the API ---------------------------------------------------------------


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_bell_counts_unread_and_the_page_marks_read(p):
    request = pi_request(p)
    client = browser(p.program_manager)
    home = client.get("/").content.decode()
    assert 'data-testid="bell-count">1<' in home
    page = client.get("/notifications/").content.decode()
    assert "awaits your decision" in page
    (note,) = notices(p.program_manager)
    opened = client.post(f"/notifications/{note.pk}/open/")
    assert opened["Location"] == f"/requests/{request.pk}/"
    note.refresh_from_db()
    assert note.read_at is not None
    assert 'data-testid="bell-count"' not in client.get("/").content.decode()


def test_mark_all_read_and_nobody_marks_or_opens_another_persons(p):
    pi_request(p)
    (theirs,) = notices(p.org_admin)
    outsider = browser(p.outsider)
    assert outsider.post("/notifications/read/", {"id": theirs.pk}).status_code == 302
    assert outsider.post(f"/notifications/{theirs.pk}/open/")["Location"] == "/notifications/"
    theirs.refresh_from_db()
    assert theirs.read_at is None
    response = browser(p.org_admin).post("/notifications/read/")
    assert response.status_code == 302
    theirs.refresh_from_db()
    assert theirs.read_at is not None


@pytest.mark.parametrize("query", ["?kind=nonsense", "?unread=maybe", "?page=%C2%B2", "?page=0"])
def test_a_filter_the_page_cannot_read_is_a_400(p, query):
    assert browser(p.researcher).get("/notifications/" + query).status_code == 400


def test_the_api_lists_only_the_callers_and_marks_read(p):
    pi_request(p)
    workload = make_workload(p.project_a1, p.cluster, p.researcher, name="done", gpus=1)
    run_end(run=started_run(workload, p.node), reason=RunEndReason.SUCCEEDED, exit_code=0)

    def api(user):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
        return client

    manager, researcher = api(p.program_manager), api(p.researcher)
    listed = manager.get("/api/notifications/").json()
    assert [n["kind"] for n in listed["results"]] == ["approval_awaiting"]
    mine = researcher.get("/api/notifications/?unread=true").json()["results"]
    assert [n["title"] for n in mine] == ["“done” finished in Detection"]
    other = listed["results"][0]["id"]
    assert researcher.post(f"/api/notifications/{other}/read/").status_code == 404
    assert manager.post(f"/api/notifications/{other}/read/").json() == {"marked": 1}
    assert researcher.post("/api/notifications/read-all/").json() == {"marked": 1}
    assert researcher.get("/api/notifications/?unread=true").json()["results"] == []
    assert researcher.get("/api/notifications/?kind=nope").status_code == 400
    assert researcher.get("/api/notifications/?unread=maybe").status_code == 400
    assert APIClient().get("/api/notifications/").status_code in (401, 403)
    assert get_user_model().objects.count() == 6
    assert timedelta(0) < BURST_WINDOW


# --- nodes -------------------------------------------------------------------------------------


def test_operators_are_told_a_node_went_down_and_a_rack_folds_into_one_notice(p):
    from scheduler.services.nodes import node_mark_down

    nodes = [Node.objects.create(cluster=p.cluster, name=f"rack-{i}", gpus=8) for i in range(3)]
    node_mark_down(node=nodes[0], actor=p.org_admin, reason="PSU swap")
    assert notices(p.org_admin) == []  # the operator who did it is not told of it
    node_mark_down(node=nodes[1], reason="No heartbeat.", source="system")
    node_mark_down(node=nodes[2], reason="No heartbeat.", source="system")
    (note,) = notices(p.org_admin)
    assert note.kind == NotificationKind.NODE_ATTENTION
    assert note.count == 2
    assert note.title == "2 nodes of h100 went down or finished draining"
    for persona in ("program_manager", "pi", "researcher", "finance", "outsider"):
        assert notices(p.users[persona]) == []


def test_operators_are_told_when_a_drain_finishes(p):
    from scheduler.services.cycle import scheduling_cycle_run
    from scheduler.services.nodes import node_drain

    node_drain(node=p.node, actor=p.org_admin, reason="Replace a fan.")
    scheduling_cycle_run(cluster_id=p.cluster.pk)
    (note,) = notices(p.org_admin)
    assert note.title == "Node gpu-1 of h100 finished draining: ready for repair"
    assert note.body == "Replace a fan."
    assert note.link == f"/nodes/{p.node.pk}/"
    p.node.refresh_from_db()
    assert p.node.state == "drained"
    scheduling_cycle_run(cluster_id=p.cluster.pk)  # a drained node is told once
    assert len(notices(p.org_admin)) == 1


def test_the_api_reads_and_changes_email_choices(p):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=p.pi).key}")
    shown = client.get("/api/notifications/preferences/").json()
    assert shown["approval_awaiting"] == "immediate"
    assert shown["workload_preempted"] == "daily"
    assert set(shown) == set(NotificationKind.values)
    changed = client.put(
        "/api/notifications/preferences/", {"workload_finished": "daily"}, format="json"
    )
    assert changed.status_code == 200
    assert changed.json()["workload_finished"] == "daily"
    assert changed.json()["approval_awaiting"] == "immediate"  # untouched
    bad = client.put(
        "/api/notifications/preferences/", {"workload_failed": "hourly"}, format="json"
    )
    assert bad.status_code == 400 and "workload_failed" in bad.json()["errors"]
    assert client.get("/api/notifications/preferences/").json()["workload_failed"] == "immediate"


# --- shares ------------------------------------------------------------------------------------


def test_a_change_of_share_tells_the_projects_it_affects(p):
    from governance.services.allocations import allocation_split

    allocation_split(
        actor=p.program_manager, parent=p.program_a, cluster=p.cluster,
        percents={p.project_a1: Decimal("55"), p.project_a2: Decimal("45")},
        reason="Detection's paper deadline.",
    )  # fmt: skip
    (note,) = notices(p.pi, kind=NotificationKind.SHARE_CHANGED)
    assert note.title.startswith("Detection's share on h100 changes from 50 % to 55 % from ")
    assert note.body == "Detection's paper deadline."
    assert notices(p.program_manager) == []  # who made it is not told
    assert notices(p.researcher) == []


def test_a_change_of_a_programs_share_tells_its_managers_and_pis(p):
    from governance.services.allocations import allocation_split

    allocation_split(
        actor=p.org_admin, parent=p.organization, cluster=p.cluster,
        percents={p.program_a: Decimal("65"), p.program_b: Decimal("35")},
        reason="Vision grows.",
    )  # fmt: skip
    told = {n.recipient.username for n in Notification.objects.filter(kind="share_changed")}
    assert {"program_manager", "pi"} <= told
    assert "org_admin" not in told and "researcher" not in told and "finance" not in told
    note = notices(p.program_manager, kind=NotificationKind.SHARE_CHANGED)[0]
    assert note.title.startswith("Vision's share on h100 changes from 60 % to 65 % from ")


def test_starts_of_one_cycle_are_one_notice_per_submitter_and_project(p):
    from scheduler.services.cycle import scheduling_cycle_run
    from scheduler.services.workloads import workload_submit

    for i in range(3):
        workload_submit(
            project=p.project_a1, cluster=p.cluster, name=f"sweep-{i}", gpus=1,
            min_runtime_seconds=600, launch_spec={"command": ["train"]},
            submitted_by=p.researcher,
        )  # fmt: skip
    workload_submit(
        project=p.project_a1, cluster=p.cluster, name="solo", gpus=1, min_runtime_seconds=600,
        launch_spec={"command": ["train"]}, submitted_by=p.pi,
    )  # fmt: skip
    scheduling_cycle_run(cluster_id=p.cluster.pk)
    (mine,) = notices(p.researcher, kind=NotificationKind.WORKLOAD_STARTED)
    assert (mine.title, mine.count) == ("3 of your workloads in Detection started", 3)
    (theirs,) = notices(p.pi, kind=NotificationKind.WORKLOAD_STARTED)
    assert theirs.title == "“solo” started in Detection"
