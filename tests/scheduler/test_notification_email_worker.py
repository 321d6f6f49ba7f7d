"""Notification e-mails through a real Celery worker and a real SMTP server: a failed workload
reaches its submitter's mailbox; a worker killed in the middle of sending never sends that
e-mail again (at most once), and a duplicate of its task changes nothing."""

from __future__ import annotations

import pytest
from django.utils import timezone

from governance.choices import DeliveryState
from governance.models import EmailDelivery
from governance.services.deliveries import SENDING_GIVES_UP_AFTER
from governance.services.notification_mail import email_deliveries_sweep
from governance.tasks import notification_email_send
from scheduler.choices import RunEndReason
from scheduler.models import Node
from scheduler.services.runs import run_end
from tests.conftest import wait_for
from tests.personas import build_personas
from tests.scheduler.agent_api import started_run
from tests.scheduler.test_api_workloads import make_workload
from tests.smtp import SMTPServer

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def smtp():
    server = SMTPServer().start()
    yield server
    server.stop()


def fail_a_workload(p, node, name: str, user=None) -> None:
    workload = make_workload(p.project_a1, p.cluster, user or p.researcher, name=name, gpus=1)
    run_end(run=started_run(workload, node), reason=RunEndReason.FAILED, exit_code=2)


def test_a_failed_workload_is_mailed_by_the_worker(loop_processes, smtp):
    loop_processes.start_worker(**smtp.settings())
    p = build_personas()
    node = Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    fail_a_workload(p, node, "train-resnet")
    assert wait_for(lambda: smtp.recorder.messages, timeout=60)
    (mail,) = smtp.recorder.messages
    assert mail["To"] == "researcher@example.org"
    assert mail["Subject"].strip() == "“train-resnet” failed in Detection (exit code 2)"
    assert EmailDelivery.objects.get().state == DeliveryState.SENT


def test_a_worker_killed_mid_send_never_sends_it_twice(loop_processes, smtp):
    loop_processes.start_worker("doomed", **smtp.settings())
    p = build_personas()
    node = Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    smtp.recorder.hold.set()  # the server takes the message and then hangs in DATA
    fail_a_workload(p, node, "first")
    assert smtp.recorder.in_data.wait(timeout=60)
    loop_processes.kill9("doomed")
    smtp.recorder.hold.clear()
    smtp.recorder.release.set()
    stuck = EmailDelivery.objects.get()
    assert stuck.state == DeliveryState.SENDING

    loop_processes.start_worker("next", **smtp.settings())
    notification_email_send.delay(stuck.pk)  # a redelivered or duplicated task
    # Another person's failure (the researcher's would fold into the first notice): its
    # e-mail is sent after the duplicate by the same solo worker.
    fail_a_workload(p, node, "second", user=p.pi)
    assert wait_for(lambda: smtp.recorder.messages, timeout=60)
    assert [(m["To"], m["Subject"].strip()) for m in smtp.recorder.messages] == [
        ("pi@example.org", "“second” failed in Detection (exit code 2)")
    ]
    stuck.refresh_from_db()
    assert stuck.state == DeliveryState.SENDING
    email_deliveries_sweep(now=timezone.now() + SENDING_GIVES_UP_AFTER * 2)
    stuck.refresh_from_db()
    assert stuck.state == DeliveryState.FAILED


def test_an_organization_event_reaches_the_webhook_through_the_worker(loop_processes):
    from decimal import Decimal

    from governance.services.approvals import approval_request_create
    from governance.services.webhooks import webhook_set
    from tests.webhook_receiver import Receiver

    receiver = Receiver().start()
    try:
        loop_processes.start_worker()
        p = build_personas()
        webhook_set(organization=p.organization, url=receiver.url, enabled=True, actor=None)
        request = approval_request_create(
            actor=p.pi, parent=p.program_a, cluster=p.cluster,
            percents={p.project_a1: Decimal("55")}, reason="Two students start.",
        )  # fmt: skip
        assert wait_for(lambda: receiver.bodies, timeout=60)
        (body,) = receiver.bodies
        assert body["text"].startswith(f"Request #{request.pk} (Vision on h100) awaits")
    finally:
        receiver.stop()
