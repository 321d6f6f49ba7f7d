"""The top bar at the widths people use: every link of the account with the most (an org
admin, eleven) on one row at 1,280 and 1,600 px, however long the signed-in name; at 390 px the links
wrap under the brand and nothing leaves the screen."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

_LINK_BOXES = "[...document.querySelectorAll('.nav a')].map(a => a.getBoundingClientRect())"


@pytest.mark.parametrize("width", [1280, 1600])
def test_an_org_admins_links_sit_on_one_row(page, live_server, world, width):
    admin = world.users["org_admin"]
    admin.first_name, admin.last_name = "Maximiliana-Theodora", "Vandenberghe-Oyelaran"
    admin.save(update_fields=["first_name", "last_name"])
    page.set_viewport_size({"width": width, "height": 800})
    sign_in(page, live_server, "org_admin", world.password)
    boxes = page.evaluate(f"{_LINK_BOXES}.map(b => [b.top, b.right])")
    assert len(boxes) == 11  # Home … Audit: the most any account has
    assert len({round(top) for top, _ in boxes}) == 1, boxes
    assert max(right for _, right in boxes) <= width
    # Shown cut short with an ellipsis on wide screens, left out below; whole in the tooltips.
    name = "Maximiliana-Theodora Vandenberghe-Oyelaran"
    assert page.locator(".userbox .who").get_attribute("title") == f"Signed in as {name}"
    sign_out = page.get_by_role("button", name="Sign out")
    assert sign_out.get_attribute("title") == f"Sign out {name}"
    assert (
        page.evaluate("document.querySelector('.userbox').getBoundingClientRect().right") <= width
    )


def test_a_bar_with_few_links_keeps_the_product_name_and_the_signed_in_name(
    page, live_server, world
):
    page.set_viewport_size({"width": 1280, "height": 800})
    sign_in(page, live_server, "researcher", world.password)
    assert page.locator(".brand-name").is_visible()
    assert page.locator(".userbox .who").is_visible()
    tops = page.evaluate(f"{_LINK_BOXES}.map(b => b.top)")
    assert len({round(top) for top in tops}) == 1


def test_on_a_phone_the_links_wrap_and_stay_on_screen(page, live_server, world):
    page.set_viewport_size({"width": 390, "height": 800})
    sign_in(page, live_server, "org_admin", world.password)
    rights = page.evaluate(f"{_LINK_BOXES}.map(b => b.right)")
    assert len(rights) == 11
    assert max(rights) <= 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
