"""Journey: a PI asks for a change, the manager's bell says a request waits, the manager opens
it from the notification centre and decides, and the PI's bell tells the result. At 1,280 and
390 px; screenshots of the centre."""

from __future__ import annotations

from html import escape

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in, sign_out
from tests.browser.test_journeys import tree_row
from tests.browser.test_screenshots import out_dir, shoot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_bell_carries_a_request_to_the_manager_and_the_answer_back(
    page,
    live_server,
    world,
    out_dir,  # noqa: F811
    width,
):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, live_server, "pi", world.password)
    expect(page.get_by_test_id("bell-count")).to_have_count(0)
    page.get_by_role("link", name="Open the h100 tree").click()
    tree_row(page, "Vision").get_by_role("link", name="Request a change").click()
    page.get_by_label("New share of Detection in percent").fill("60")
    page.get_by_label("Reason").fill("Paper deadline in May.")
    page.get_by_role("button", name="Send the request").click()
    expect(page.get_by_test_id("state")).to_have_text("Submitted")
    sign_out(page)

    sign_in(page, live_server, "program_manager", world.password)
    expect(page.get_by_test_id("bell-count")).to_have_text("1")
    page.get_by_test_id("bell").click()
    notice = page.get_by_test_id("notifications").get_by_role("listitem").first
    expect(notice).to_contain_text("awaits your decision")
    expect(notice).to_contain_text("Paper deadline in May.")
    if width == 1280:
        shoot(page, out_dir, "70-notifications-manager")
    else:
        shoot(page, out_dir, "71-notifications-manager-390")
    notice.get_by_role("button", name="awaits your decision").click()
    expect(page.get_by_test_id("state")).to_have_text("Submitted")
    expect(page.get_by_test_id("bell-count")).to_have_count(0)  # opening it read it
    page.get_by_label("Note to the requester (optional)").fill("Go ahead.")
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("state")).to_have_text("Applied")
    sign_out(page)

    sign_in(page, live_server, "pi", world.password)
    expect(page.get_by_test_id("bell-count")).to_have_text("2")  # approved, then applied
    page.get_by_test_id("bell").click()
    items = page.get_by_test_id("notifications").get_by_role("listitem")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("was applied: the new shares are in force")
    expect(items.nth(1)).to_contain_text("was approved by program_manager")
    expect(items.nth(1)).to_contain_text("Go ahead.")
    if width == 1280:
        shoot(page, out_dir, "72-notifications-pi")
    page.get_by_test_id("mark-all-read").click()
    expect(page.get_by_test_id("bell-count")).to_have_count(0)
    expect(page.locator(".notice-list li.unread")).to_have_count(0)

    if width == 1280:
        _shoot_the_email(page, out_dir)

    page.get_by_role("link", name="E-mail settings").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Notification settings")
    page.get_by_label("Your workload finished").select_option("immediate")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Your notification settings are saved.")).to_be_visible()
    expect(page.get_by_label("Your workload finished")).to_have_value("immediate")
    if width == 1280:
        shoot(page, out_dir, "73-notification-settings")


def _shoot_the_email(page, out_dir) -> None:  # noqa: F811
    """The PI's e-mail about the decision, sent through the real sending path (the test
    settings' in-memory mail box), shown as a mail client would show a plain-text mail."""
    from django.core import mail

    from governance.models import EmailDelivery
    from governance.services.notification_mail import email_delivery_send

    mail.outbox.clear()
    for delivery in EmailDelivery.objects.filter(address="pi@example.org").order_by("pk")[:1]:
        assert email_delivery_send(delivery_id=delivery.pk) == "sent"
    (message,) = mail.outbox
    headers = "".join(
        f"<div><b>{escape(name)}:</b> {escape(str(message.extra_headers.get(name) or value))}</div>"
        for name, value in (
            ("From", message.from_email), ("To", ", ".join(message.to)),
            ("Subject", message.subject), ("List-Unsubscribe", ""),
        )
    )  # fmt: skip
    page.set_content(
        "<html><body style='font-family: sans-serif; margin: 2rem; max-width: 60rem'>"
        f"<div style='border-bottom: 1px solid #ccc; padding-bottom: .5rem'>{headers}</div>"
        f"<pre style='white-space: pre-wrap; font-size: 14px'>{escape(message.body)}</pre>"
        "</body></html>"
    )
    shoot(page, out_dir, "74-notification-email")
    page.go_back()
