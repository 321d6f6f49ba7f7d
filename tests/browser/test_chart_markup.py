"""Text is text in every chart: markup in a project name of an uploaded trace is drawn as the
characters typed, never as a link or bold text inside the simulator's charts."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import run_uploaded_simulation, sign_in

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
    run_uploaded_simulation(page, live_server, trace)
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
