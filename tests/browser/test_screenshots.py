"""Screenshots of the budget pages on the demo data, in headless Chromium.

Run with ``UPDATE_SCREENSHOTS=1`` to refresh the committed PNGs under ``docs/screenshots/``;
otherwise they go to a temporary directory, so the suite still checks every page renders
and stays within a narrow screen without touching the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from governance.choices import ApprovalState
from governance.models import ApprovalRequest, Cluster, Program, Project
from tests.browser.conftest import sign_in, sign_out

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
# Every PNG stays well under 1 MB; a full page of a table is ~100-300 kB.
MAX_BYTES = 1_000_000


@pytest.fixture
def demo(transactional_db):
    """The product's own demo data (``manage.py load_demo``), with its accounts."""
    from governance.management.commands.load_demo import DEMO_ACCOUNTS

    call_command("load_demo", verbosity=0)
    return {username: password for username, password, _ in DEMO_ACCOUNTS}


@pytest.fixture
def out_dir(tmp_path) -> Path:
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        path = ROOT / "docs" / "screenshots"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path


def shoot(page, out_dir: Path, name: str) -> Path:
    """A full-page PNG; fail when the page or a table scrolls sideways, or the file is big."""
    page.wait_for_load_state("networkidle")
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"{name}: the page is {overflow}px wider than the window"
    clipped = page.evaluate(
        "[...document.querySelectorAll('.table-wrap')]"
        ".filter(el => el.scrollWidth > el.clientWidth + 1).length"
    )
    assert clipped == 0, f"{name}: {clipped} table(s) scroll sideways"
    path = out_dir / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size < MAX_BYTES, f"{name}.png is {path.stat().st_size} bytes"
    return path


def test_screenshots_of_every_page(page, live_server, demo, out_dir):
    cluster = Cluster.objects.get(slug="h100")
    vision = Program.objects.get(slug="vision")
    base = live_server.url

    page.goto(f"{base}/accounts/login/")
    shoot(page, out_dir, "01-sign-in")

    sign_in(page, live_server, "admin", demo["admin"])
    shoot(page, out_dir, "02-home-org-admin")
    page.goto(f"{base}/clusters/{cluster.pk}/tree/")
    expect(page.locator("[data-figure][data-drawn=true]")).to_have_count(1)
    shoot(page, out_dir, "03-tree")
    sign_out(page)

    sign_in(page, live_server, "manager", demo["manager"])
    shoot(page, out_dir, "04-home-program-manager")
    page.goto(f"{base}/clusters/{cluster.pk}/split/program/{vision.pk}/")
    # Move 2.5 points from the second project to the first: the live sum stays the same.
    first, second = page.locator(".share-input").nth(0), page.locator(".share-input").nth(1)
    first.fill(f"{float(first.input_value()) + 2.5:.2f}")
    second.fill(f"{float(second.input_value()) - 2.5:.2f}")
    page.get_by_label("Reason").fill("Lend 2.5 points to the first VC for its deadline.")
    shoot(page, out_dir, "05-split-editor")
    page.goto(f"{base}/requests/inbox/")
    shoot(page, out_dir, "06-inbox")
    waiting = ApprovalRequest.objects.filter(state=ApprovalState.SUBMITTED).first()
    page.goto(f"{base}/requests/{waiting.pk}/")
    shoot(page, out_dir, "07-request-detail-to-decide")
    sign_out(page)

    sign_in(page, live_server, "pi", demo["pi"])
    page.goto(f"{base}/requests/mine/")
    shoot(page, out_dir, "08-my-requests")
    decided = ApprovalRequest.objects.filter(state=ApprovalState.APPLIED).first()
    page.goto(f"{base}/requests/{decided.pk}/")
    shoot(page, out_dir, "09-request-detail-applied")
    project = decided.lines.first().project
    page.goto(f"{base}/history/project/{project.pk}/?cluster={cluster.pk}")
    shoot(page, out_dir, "10-history")
    sign_out(page)

    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, live_server, "manager", demo["manager"])
    page.goto(f"{base}/clusters/{cluster.pk}/tree/")
    expect(page.locator("[data-figure][data-drawn=true]")).to_have_count(1)
    shoot(page, out_dir, "11-tree-narrow")
    page.goto(f"{base}/clusters/{cluster.pk}/split/program/{vision.pk}/")
    shoot(page, out_dir, "12-split-editor-narrow")
    assert Project.objects.exists()
