"""Browser tests: Playwright drives the system Chromium against pytest-django's live server.

Never ``playwright install``: Chromium comes from the system (``/usr/bin/chromium``). Data is
committed (``django_db(transaction=True)``) so the live server's thread sees it.
"""

from __future__ import annotations

import os
from datetime import UTC, timedelta

import pytest
from django.utils import timezone

# Playwright's sync API runs an event loop in the test thread; the ORM calls the tests make
# between page actions are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Launch the system Chromium headless, with nothing phoning home."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"browser tests need Chromium at {CHROMIUM}: install it with "
            "`apt-get install -y chromium` (or set CHROMIUM_PATH); .ci/run does this",
            pytrace=False,
        )
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "headless": True,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    """A laptop-sized window (the pages are also checked at 390 px in the screenshots)."""
    return {**browser_context_args, "viewport": {"width": 1280, "height": 800}}


@pytest.fixture
def world(transactional_db):
    """The six personas and their tree, committed so the live server sees them."""
    from tests.personas import build_personas

    return build_personas()


@pytest.fixture
def world_with_usage(world):
    """``world`` whose charts have data: 4 x 8-GPU nodes, a pending 32-GPU workload of
    Detection, and one hour accounted (the cursor starts two hours ago; the accounting
    cursor's ``accounted_until`` is one hour ago)."""
    from scheduler.choices import WorkloadState
    from scheduler.models import Node, Workload
    from scheduler.services.usage import usage_account

    cluster = world.cluster
    for i in range(4):
        Node.objects.create(cluster=cluster, name=f"n{i}", gpus=8)
    hour = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    Workload.objects.create(
        project=world.project_a1,
        cluster=cluster,
        name="big training run",
        gpus=32,
        nodes=4,
        min_runtime_seconds=3600,
        state=WorkloadState.PENDING,
        submitted_at=hour - timedelta(hours=2),
    )
    usage_account(cluster=cluster, now=hour - timedelta(hours=2))  # the cursor starts here
    usage_account(cluster=cluster, now=hour - timedelta(hours=1))  # one hour accounted
    return world


def sign_in(page, live_server, username: str, password: str) -> None:
    """Sign in through the real sign-in form and land on the home page."""
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username or e-mail").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/")


def sign_out(page) -> None:
    """Sign out with the top bar's button."""
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/accounts/login/")


def run_uploaded_simulation(page, live_server, trace_path) -> None:
    """On the simulator page, run the whole uploaded trace on 8 GPUs; wait for the job's page."""
    import re

    page.goto(f"{live_server.url}/simulator/")
    page.get_by_label("Upload a CSV in the canonical format").check()
    page.locator("input[name=trace_file]").set_input_files(str(trace_path))
    page.get_by_label("Start (days after the first job)").fill("")
    page.get_by_label("Length (days of submissions)").fill("")
    page.get_by_label("Cluster GPUs").fill("8")
    page.get_by_role("button", name="Run the simulation").click()
    page.wait_for_url(re.compile(r".*/simulator/\d+/$"))
