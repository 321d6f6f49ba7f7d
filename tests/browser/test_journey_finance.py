"""Journey: finance opens the usage report for a month, downloads the CSV, and its totals
match the totals row shown on the page."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.governance.test_reports_selector import october_fixture  # noqa: F401
from tests.personas import personas  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_finance_downloads_the_months_csv_and_totals_match_the_page(page, live_server, october):
    sign_in(page, live_server, "finance", october.password)
    page.get_by_role("link", name="Usage report").click()
    page.goto(f"{live_server.url}/reports/usage/?month=2026-10")
    totals = page.get_by_test_id("report-totals")
    expect(totals).to_be_visible()
    cells = totals.locator("td").all_inner_texts()

    with page.expect_download() as info:
        page.get_by_test_id("download-csv").click()
    text = Path(info.value.path()).read_text(encoding="utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    last = rows[-1]

    # Total, budgeted, burst and free GPU-hours as the page shows them (one decimal,
    # thousands separators), read back from the file's totals row.
    shown = [Decimal(c.replace(",", "")) for c in cells[1:5]]
    in_file = [
        Decimal(last[column])
        for column in ("Budgeted GPU-hours", "Burst GPU-hours", "Free GPU-hours", "Total GPU-hours")
    ]
    assert shown == [v.quantize(Decimal("0.1")) for v in in_file]
    # And the file's total row equals the sum of its own lines.
    body = rows[:-1]
    assert sum(Decimal(r["Total GPU-seconds"]) for r in body) == Decimal(last["Total GPU-seconds"])


def test_the_report_shows_only_the_fields_of_the_period_picked(page, live_server, october):
    # A month and a from/to range side by side read as one period that is both. Picking the
    # range opens it on the month shown, and the address then carries the range alone.
    sign_in(page, live_server, "finance", october.password)
    page.goto(f"{live_server.url}/reports/usage/?month=2026-10")
    month_total = page.get_by_test_id("report-totals").locator("td").nth(4).inner_text()
    month, start, end = (
        page.locator("#id_month"),
        page.locator("#id_start"),
        page.locator("#id_end"),
    )
    expect(month).to_be_visible()
    expect(start).to_be_hidden()
    expect(end).to_be_hidden()

    page.locator("#id_period").select_option("range")
    expect(month).to_be_hidden()
    expect(start).to_be_visible()
    expect(start).to_have_value("2026-10-01")
    expect(end).to_have_value("2026-10-31")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**period=range**")
    assert "month=" not in page.url
    assert "start=2026-10-01" in page.url and "end=2026-10-31" in page.url
    expect(page.get_by_test_id("report-totals").locator("td").nth(4)).to_have_text(month_total)

    # A refused range keeps the range's fields in view, the bad one marked.
    page.goto(f"{live_server.url}/reports/usage/?period=range&start=2026-10-31&end=nonsense")
    expect(start).to_be_visible()
    expect(page.locator(".field.has-error #id_end")).to_be_visible()
    expect(month).to_be_hidden()
