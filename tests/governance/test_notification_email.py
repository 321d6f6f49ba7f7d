"""Notification e-mails against a real SMTP server (aiosmtpd on 127.0.0.1): who gets one, the
stop link (signed, one click), a refused address, a server away, a send that never repeats,
a folded burst that sends one. The path through a real worker is in
``tests/scheduler/test_notification_email_worker.py``."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from governance.choices import DeliveryState, EmailChoice, NotificationKind
from governance.models import EmailDelivery, EmailDigest, Notification, NotificationPreference
from governance.services.approvals import approval_request_create
from governance.services.deliveries import SENDING_GIVES_UP_AFTER
from governance.services.notification_mail import (
    email_deliveries_sweep,
    email_delivery_send,
    email_digests_send,
    notification_prefs_set,
)
from scheduler.choices import RunEndReason
from scheduler.models import Node
from scheduler.services.runs import run_end
from tests.personas import build_personas
from tests.scheduler.agent_api import started_run
from tests.scheduler.test_api_workloads import make_workload
from tests.smtp import SMTPServer, free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def smtp(settings):
    server = SMTPServer().start()
    for key, value in server.settings().items():
        setattr(settings, key, int(value) if key in ("EMAIL_PORT", "EMAIL_TIMEOUT") else value)
    settings.SITE_URL = "http://governance.example"
    yield server
    server.stop()


@pytest.fixture
def p(db):
    return build_personas()


def ask(p):
    return approval_request_create(
        actor=p.pi, parent=p.program_a, cluster=p.cluster,
        percents={p.project_a1: Decimal("55")}, reason="Two students start.",
    )  # fmt: skip


def send_all() -> list[str]:
    return [email_delivery_send(delivery_id=d.pk) for d in EmailDelivery.objects.order_by("pk")]


def test_a_request_awaiting_a_decision_is_mailed_with_a_stop_link_that_works(p, smtp):
    request = ask(p)
    assert send_all() == ["sent", "sent"]
    received = {m["To"]: m for m in smtp.recorder.messages}
    assert set(received) == {"org_admin@example.org", "program_manager@example.org"}
    mail = received["program_manager@example.org"]
    assert mail["Subject"].strip() == f"Request #{request.pk} (Vision on h100) awaits your decision"
    body = mail.get_content()
    assert f"http://governance.example/requests/{request.pk}/" in body
    assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    stop = str(mail["List-Unsubscribe"]).strip().strip("<>")
    assert stop in body
    # One click, without a session (a mail client's POST): that kind stops, others do not.
    client = Client(enforce_csrf_checks=True)
    path = urlsplit(stop).path
    assert "Stop these e-mails" in client.get(path).content.decode()
    assert "No more e-mails" in client.post(path).content.decode()
    assert NotificationPreference.objects.get(user=p.program_manager).email == EmailChoice.OFF
    assert client.get(path[:-5] + "xxxx/").status_code == 404  # a token that is not ours
    ask(p)
    assert [d.address for d in EmailDelivery.objects.filter(state=DeliveryState.QUEUED)] == [
        "org_admin@example.org"
    ]


def test_routine_kinds_stay_in_the_app_unless_chosen(p, smtp):
    node = Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    done = make_workload(p.project_a1, p.cluster, p.researcher, name="done", gpus=1)
    run_end(run=started_run(done, node), reason=RunEndReason.SUCCEEDED, exit_code=0)
    assert not EmailDelivery.objects.exists()
    notification_prefs_set(
        user=p.researcher, choices={NotificationKind.WORKLOAD_PREEMPTED: EmailChoice.IMMEDIATE}
    )
    preemptor = make_workload(p.project_a1, p.cluster, None, name="urgent", gpus=1)
    for i in range(4):  # a burst: one notice, one e-mail
        victim = make_workload(
            p.project_a1, p.cluster, p.researcher, name=f"s{i}", gpus=1, min_runtime_seconds=600
        )
        run_end(run=started_run(victim, node, by=preemptor), reason=RunEndReason.PREEMPTED)
    assert send_all() == ["sent"]
    assert len(smtp.recorder.messages) == 1


def test_a_refused_address_fails_alone(p, smtp):
    smtp.recorder.refused.add("org_admin@example.org")
    ask(p)
    results = {
        d.address: email_delivery_send(delivery_id=d.pk) for d in EmailDelivery.objects.all()
    }
    assert results == {"org_admin@example.org": "failed", "program_manager@example.org": "sent"}
    failed = EmailDelivery.objects.get(address="org_admin@example.org")
    assert failed.state == DeliveryState.FAILED and "550" in failed.last_error


def test_a_server_away_is_retried_then_given_up(p, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    ask(p)
    delivery = EmailDelivery.objects.order_by("pk").first()
    assert email_delivery_send(delivery_id=delivery.pk) == "retry"
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == (DeliveryState.QUEUED, 1)
    assert "Connection refused" in delivery.last_error or "Errno" in delivery.last_error
    assert email_delivery_send(delivery_id=delivery.pk, final=True) == "failed"


def test_a_claimed_email_is_never_sent_again(p, smtp):
    ask(p)
    delivery = EmailDelivery.objects.order_by("pk").first()
    claimed = timezone.now() - SENDING_GIVES_UP_AFTER - timedelta(minutes=1)
    EmailDelivery.objects.filter(pk=delivery.pk).update(
        state=DeliveryState.SENDING, claimed_at=claimed, attempts=1
    )  # as a worker that died mid-send leaves it
    assert email_delivery_send(delivery_id=delivery.pk) == "skipped"
    assert email_deliveries_sweep() >= 1
    delivery.refresh_from_db()
    assert delivery.state == DeliveryState.FAILED
    assert "not sent again" in delivery.last_error
    assert email_delivery_send(delivery_id=delivery.pk) == "skipped"
    assert smtp.recorder.messages == []


def test_the_settings_page_saves_a_choice_per_kind(p):
    client = Client()
    client.force_login(p.researcher)
    page = client.get("/notifications/preferences/").content.decode()
    assert "Your workload failed" in page and "researcher@example.org" in page
    choices = {kind: EmailChoice.OFF for kind in NotificationKind.values}
    choices[NotificationKind.WORKLOAD_FINISHED] = EmailChoice.IMMEDIATE
    assert client.post("/notifications/preferences/", choices).status_code == 302
    assert (
        NotificationPreference.objects.get(
            user=p.researcher, kind=NotificationKind.WORKLOAD_FINISHED
        ).email
        == EmailChoice.IMMEDIATE
    )
    bad = client.post("/notifications/preferences/", {**choices, "workload_failed": "weekly"})
    assert bad.status_code == 400


# --- daily digests -----------------------------------------------------------------------------


def tomorrow_at(hour: int, minute: int = 0):
    """A fixed local time tomorrow: the events and digests of a test happen at set hours,
    whatever the hour the test runs at."""
    tomorrow = timezone.localtime() + timedelta(days=1)
    return tomorrow.replace(hour=hour, minute=minute, second=0, microsecond=0)


def test_a_daily_digest_gathers_the_days_notices_once(p, smtp):
    node = Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    notification_prefs_set(
        user=p.researcher, choices={NotificationKind.WORKLOAD_FINISHED: EmailChoice.DAILY}
    )  # preemptions are in the digest by default
    events = tomorrow_at(5)
    preemptor = make_workload(p.project_a1, p.cluster, None, name="urgent", gpus=1)
    for i in range(3):  # one folded notice
        victim = make_workload(
            p.project_a1, p.cluster, p.researcher, name=f"s{i}", gpus=1, min_runtime_seconds=600
        )
        run_end(
            run=started_run(victim, node, by=preemptor), reason=RunEndReason.PREEMPTED, now=events
        )
    done = make_workload(p.project_a1, p.cluster, p.researcher, name="done", gpus=1)
    run_end(run=started_run(done, node), reason=RunEndReason.SUCCEEDED, exit_code=0, now=events)
    assert not EmailDelivery.objects.exists()  # nothing at once

    assert email_digests_send(now=tomorrow_at(6)) == 0  # before the digest hour
    assert email_digests_send(now=tomorrow_at(7)) == 1
    (mail,) = smtp.recorder.messages
    assert mail["To"] == "researcher@example.org"
    assert mail["Subject"].strip() == "Your daily digest: 2 notifications"
    body = mail.get_content()
    assert "3 of your workloads in Detection were preempted or evicted" in body
    assert "“done” finished in Detection" in body
    assert body.count("/notifications/unsubscribe/") == 2  # one stop link per kind
    # Later the same day, and the next day with nothing new: no second digest.
    assert email_digests_send(now=tomorrow_at(9)) == 0
    assert email_digests_send(now=tomorrow_at(7) + timedelta(days=1)) == 0
    assert len(smtp.recorder.messages) == 1
    assert EmailDigest.objects.get().state == DeliveryState.SENT


def test_a_digest_the_server_missed_goes_at_the_next_run_of_the_day(p, settings):
    node = Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    preemptor = make_workload(p.project_a1, p.cluster, None, name="urgent", gpus=1)
    victim = make_workload(
        p.project_a1, p.cluster, p.researcher, name="s", gpus=1, min_runtime_seconds=600
    )
    run_end(
        run=started_run(victim, node, by=preemptor),
        reason=RunEndReason.PREEMPTED,
        now=tomorrow_at(5),
    )
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    assert email_digests_send(now=tomorrow_at(7)) == 0
    assert EmailDigest.objects.get().state == DeliveryState.QUEUED
    server = SMTPServer().start()
    try:
        settings.EMAIL_PORT = server.port
        assert email_digests_send(now=tomorrow_at(8)) == 1
        assert len(server.recorder.messages) == 1
    finally:
        server.stop()


# --- every kind reaches the mail server ----------------------------------------------------------


def _event_of(kind: str, p):
    """Make one event of ``kind`` happen; returns who should get the e-mail."""
    from datetime import UTC, datetime

    from governance.services.approvals import approval_approve
    from governance.services.reports import report_monthly_send
    from scheduler.models import UsageHour
    from scheduler.services.delivery_alerts import delivery_alerts_check, month_usage_check
    from scheduler.services.nodes import node_mark_down

    node = Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    if kind == NotificationKind.APPROVAL_AWAITING:
        ask(p)
        return p.program_manager
    if kind == NotificationKind.APPROVAL_DECIDED:
        approval_approve(actor=p.program_manager, approval_request=ask(p))
        return p.pi
    if kind == NotificationKind.SHARE_CHANGED:
        from governance.services.allocations import allocation_split

        allocation_split(
            actor=p.program_manager, parent=p.program_a, cluster=p.cluster,
            percents={p.project_a1: Decimal("55"), p.project_a2: Decimal("45")}, reason="More.",
        )  # fmt: skip
        return p.pi
    if kind in (NotificationKind.WORKLOAD_FINISHED, NotificationKind.WORKLOAD_FAILED):
        work = make_workload(p.project_a1, p.cluster, p.researcher, name="w", gpus=1)
        reason = "succeeded" if kind == NotificationKind.WORKLOAD_FINISHED else "failed"
        run_end(run=started_run(work, node), reason=reason, exit_code=0)
        return p.researcher
    if kind == NotificationKind.WORKLOAD_IDLE:
        from scheduler.services.utilization import idle_rule_apply, utilization_report
        from tests.scheduler.test_utilization_store import T0, item, node_of, run_on

        agent_node = node_of(p.cluster, "gpu-agent")
        run = run_on(p, agent_node)  # 4 GPUs from T0, minimum runtime 10 minutes
        end = T0 + timedelta(minutes=40)
        utilization_report(node=agent_node, reports=[item(run, T0, end, 4 * 2400, 0)], now=end)
        assert idle_rule_apply(cluster=p.cluster, now=end)["marked"] == 1
        return p.researcher
    if kind == NotificationKind.WORKLOAD_STARTED:
        from scheduler.services.cycle import scheduling_cycle_run
        from scheduler.services.workloads import workload_submit

        workload_submit(
            project=p.project_a1, cluster=p.cluster, name="w", gpus=1, min_runtime_seconds=600,
            launch_spec={"command": ["train"]}, submitted_by=p.researcher,
        )  # fmt: skip
        scheduling_cycle_run(cluster_id=p.cluster.pk)
        return p.researcher
    if kind == NotificationKind.WORKLOAD_PREEMPTED:
        by = make_workload(p.project_a1, p.cluster, None, name="by", gpus=1)
        work = make_workload(p.project_a1, p.cluster, p.researcher, name="w", gpus=1,
                             min_runtime_seconds=600)  # fmt: skip
        run_end(run=started_run(work, node, by=by), reason=RunEndReason.PREEMPTED)
        return p.researcher
    if kind == NotificationKind.NODE_ATTENTION:
        node_mark_down(node=node, reason="PSU.", source="system")
        return p.org_admin
    if kind == NotificationKind.REPORT_READY:
        report_monthly_send(now=datetime(2026, 11, 1, 6, tzinfo=UTC))
        return p.finance
    now = timezone.localtime().replace(day=11, hour=12, minute=20)
    end = now.replace(minute=0, second=0, microsecond=0)
    for h in range(24 if kind == NotificationKind.TEAM_UNDER_DELIVERED else 250):
        UsageHour.objects.create(
            project=p.project_a1, cluster=p.cluster, hour=end - timedelta(hours=h + 1),
            entitled_gpu_seconds=8 * 3600, demand_gpu_seconds=30 * 3600,
            budgeted_gpu_seconds=(4 if kind == NotificationKind.TEAM_UNDER_DELIVERED else 8) * 3600,
            burst_gpu_seconds=(0 if kind == NotificationKind.TEAM_UNDER_DELIVERED else 22) * 3600,
            free_gpu_seconds=0,
        )  # fmt: skip
    check = (
        delivery_alerts_check
        if kind == NotificationKind.TEAM_UNDER_DELIVERED
        else month_usage_check
    )
    assert check(now=now) >= 1
    return p.pi


@pytest.mark.parametrize("kind", NotificationKind.values)
def test_every_kind_reaches_the_mail_server_when_chosen(p, smtp, kind):
    recipient_of = {}
    for user in p.users.values():
        notification_prefs_set(user=user, choices=dict.fromkeys(NotificationKind.values, "off"))
        notification_prefs_set(user=user, choices={kind: EmailChoice.IMMEDIATE})
        recipient_of[user.pk] = user
    to = _event_of(kind, p)
    assert "sent" in send_all()
    titles = set(
        Notification.objects.filter(recipient=to, kind=kind).values_list("title", flat=True)
    )
    mine = [
        m for m in smtp.recorder.messages
        if m["To"] == to.email and m["Subject"].strip() in titles
    ]  # fmt: skip
    # One per notice (approved and applied are two; so are 80 % and 100 % of a month); finance
    # also gets the report itself, XLSX attached, which is not a notice.
    assert len(mine) == len(titles)
    assert all("/notifications/unsubscribe/" in str(m["List-Unsubscribe"]) for m in mine)
