"""Text is text in every chart: markup in a project name of an uploaded trace is drawn as the
characters typed, never as a link or bold text inside the simulator's charts."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVIL = '<a href="https://example.org/x">click</a><b>bold</b>'


def test_markup_in_an_uploaded_project_name_is_shown_as_typed(
    page, live_server, world, settings, tmp_path
):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # run it in the server's process, in a thread
    quoted = EVIL.replace('"', '""')
    trace = tmp_path / "evil.csv"
    trace.write_text(
        "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"
        f'a,2026-01-05T00:00:00,7200,8,"{quoted}",,\n'
        "b,2026-01-05T00:10:00,3600,4,segmentation,,\n"
    )
    sign_in(page, live_server, "program_manager", world.password)
    page.goto(f"{live_server.url}/simulator/")
    page.get_by_label("Upload a CSV in the canonical format").check()
    page.locator("input[name=trace_file]").set_input_files(str(trace))
    page.get_by_label("Start (days after the first job)").fill("")
    page.get_by_label("Length (days of submissions)").fill("")
    page.get_by_label("Cluster GPUs").fill("8")
    page.get_by_role("button", name="Run the simulation").click()
    page.wait_for_url(re.compile(r".*/simulator/\d+/$"))
    expect(page.get_by_test_id("comparison")).to_be_visible(timeout=60_000)
    charts = page.locator(".js-plotly-plot")
    expect(charts.first).to_be_visible(timeout=30_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-figure]')].every(e => e.dataset.drawn)"
    )
    # No link and no bold made from the name, anywhere in any chart ...
    assert charts.locator("svg a").count() == 0
    assert charts.locator("svg text b, svg tspan[style*='bold']").count() == 0
    # ... and the name is there as the characters typed.
    drawn = " ".join(charts.locator("svg text").all_text_contents())
    assert '<a href="https://example.org/x">' in drawn or "<a href=" in drawn
