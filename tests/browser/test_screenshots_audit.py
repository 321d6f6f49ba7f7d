"""Screenshots of the audit trail and "People and roles" pages on the demo data.

``UPDATE_SCREENSHOTS=1`` writes ``docs/screenshots/40-audit.png`` and ``41-roles.png``;
otherwise they go to a temporary directory and the test still checks that both pages render
for the org admin, fit a laptop screen, and keep the 403 for a researcher.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from governance.models import Cluster, Organization, Program
from governance.selectors.tree import share_at
from governance.services.allocations import allocation_split
from governance.services.roles import role_grant
from tests.browser.conftest import sign_in, sign_out
from tests.browser.test_screenshots import demo, out_dir, shoot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_screenshots_of_the_audit_and_roles_pages(page, live_server, demo, out_dir):  # noqa: F811
    users = get_user_model().objects
    admin = users.get(username="admin")
    organization = Organization.objects.get(programs__slug="vision")
    cluster = Cluster.objects.get(slug="h100")
    vision = Program.objects.get(slug="vision")
    children = list(vision.projects.order_by("name")[:1])
    allocation_split(
        actor=users.get(username="manager"),
        parent=vision,
        cluster=cluster,
        # One point less than today: always fits under 100 %.
        percents={children[0]: max(share_at(node=children[0], cluster=cluster) - 1, Decimal(0))},
        reason="Paper deadline: two more weeks of GPU time.",
    )
    role_grant(
        actor=admin,
        user=users.get(username="outsider"),
        role="finance",
        scope=organization,
        reason="Joins the finance team.",
    )
    base = live_server.url

    sign_in(page, live_server, "admin", demo["admin"])
    page.goto(f"{base}/audit/")
    expect(page.get_by_test_id("audit-event").first).to_be_visible()
    expect(page.get_by_role("link", name="Audit")).to_be_visible()
    shoot(page, out_dir, "40-audit")
    page.goto(f"{base}/people/")
    expect(page.get_by_test_id("roles-table")).to_be_visible()
    shoot(page, out_dir, "41-roles")
    sign_out(page)

    sign_in(page, live_server, "researcher", demo["researcher"])
    response = page.goto(f"{base}/audit/")
    assert response.status == 403
