"""An organization's webhook, against a real HTTP receiver on 127.0.0.1: set by an org admin,
organization events posted once as JSON with a ``text``, a burst folded into one post, a
failing receiver retried and then shown to the org admin, workload events never posted."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from governance.choices import DeliveryState
from governance.models import OrganizationWebhook, WebhookDelivery
from governance.services.approvals import approval_request_create
from governance.services.webhooks import webhook_delivery_post, webhook_set
from scheduler.choices import RunEndReason
from scheduler.models import Node
from scheduler.services.nodes import node_mark_down
from scheduler.services.runs import run_end
from tests.personas import build_personas
from tests.scheduler.agent_api import started_run
from tests.scheduler.test_api_workloads import make_workload
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def p(db, settings):
    settings.SITE_URL = "http://governance.example"
    return build_personas()


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post_all() -> list[str]:
    return [webhook_delivery_post(delivery_id=d.pk) for d in WebhookDelivery.objects.order_by("pk")]


def ask(p):
    return approval_request_create(
        actor=p.pi, parent=p.program_a, cluster=p.cluster,
        percents={p.project_a1: Decimal("55")}, reason="Two students start.",
    )  # fmt: skip


def test_an_org_admin_sets_the_webhook_and_requests_are_posted_once(p, receiver):
    page = browser(p.org_admin)
    assert (
        page.post("/notifications/webhook/", {"url": receiver.url, "enabled": "on"}).status_code
        == 302
    )
    request = ask(p)
    assert post_all() == ["sent"]  # one post per event, not one per manager told
    (body,) = receiver.bodies
    assert body["event"]["kind"] == "approval_awaiting"
    assert body["text"] == (
        f"Request #{request.pk} (Vision on h100) awaits your decision "
        f"http://governance.example/requests/{request.pk}/"
    )
    assert post_all() == ["skipped"]  # posted: never again
    assert "awaits your decision" in page.get("/notifications/webhook/").content.decode()


def test_a_rack_going_down_is_one_post(p, receiver):
    webhook_set(organization=p.organization, url=receiver.url, enabled=True, actor=p.org_admin)
    for i in range(3):
        node = Node.objects.create(cluster=p.cluster, name=f"rack-{i}", gpus=8)
        node_mark_down(node=node, reason="No heartbeat.", source="system")
    assert post_all() == ["sent"]
    (body,) = receiver.bodies
    assert body["event"]["count"] == 3
    assert body["text"].startswith("3 nodes of h100 went down or finished draining")


def test_workload_events_stay_private(p, receiver):
    webhook_set(organization=p.organization, url=receiver.url, enabled=True, actor=p.org_admin)
    node = Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    done = make_workload(p.project_a1, p.cluster, p.researcher, name="done", gpus=1)
    run_end(run=started_run(done, node), reason=RunEndReason.FAILED, exit_code=1)
    assert not WebhookDelivery.objects.exists()


def test_a_failing_receiver_is_retried_then_shown_to_the_org_admin(p, receiver):
    webhook_set(organization=p.organization, url=receiver.url, enabled=True, actor=p.org_admin)
    receiver.status = 503
    ask(p)
    delivery = WebhookDelivery.objects.get()
    assert webhook_delivery_post(delivery_id=delivery.pk) == "retry"
    assert webhook_delivery_post(delivery_id=delivery.pk, final=True) == "failed"
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == (DeliveryState.FAILED, 2)
    page = browser(p.org_admin).get("/notifications/webhook/").content.decode()
    assert "HTTP 503" in page
    receiver.status = 400  # a receiver that refuses the body: no retry
    ask(p)
    second = WebhookDelivery.objects.latest("pk")
    assert webhook_delivery_post(delivery_id=second.pk) == "failed"


def test_only_org_admins_and_http_addresses(p, receiver):
    for persona in ("program_manager", "pi", "researcher", "finance", "outsider"):
        assert browser(p.users[persona]).get("/notifications/webhook/").status_code == 403
    page = browser(p.org_admin)
    for bad in ("ftp://example.org/x", "not a url", "javascript:alert(1)"):
        assert page.post("/notifications/webhook/", {"url": bad}).status_code == 400
    assert not OrganizationWebhook.objects.exists()
    page.post("/notifications/webhook/", {"url": receiver.url})  # saved, but turned off
    assert OrganizationWebhook.objects.get().enabled is False
    ask(p)
    assert not WebhookDelivery.objects.exists()
