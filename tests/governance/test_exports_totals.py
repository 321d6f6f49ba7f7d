"""CSV and XLSX exports parsed back: their totals equal the ledger exactly, every row is
there, and the workbook carries number formats and a totals row."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from openpyxl import load_workbook

from governance.reports.csv_writer import report_csv
from governance.reports.xlsx_writer import report_xlsx
from tests.governance.test_reports_selector import (  # noqa: F401 (the fixture)
    OCTOBER,
    ledger_total,
    october_fixture,
    report_for,
)

pytestmark = pytest.mark.django_db

D = Decimal
OCT_START, NOV_START = datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)
SECONDS = ("Budgeted GPU-seconds", "Burst GPU-seconds", "Free GPU-seconds", "Total GPU-seconds")


def parse_csv(text: str) -> tuple[list[dict], dict]:
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[-1]["Period start"] == "Total"
    return rows[:-1], rows[-1]


def parse_xlsx(content: bytes) -> tuple[list[dict], dict, object]:
    sheet = load_workbook(io.BytesIO(content))["Usage"]
    values = list(sheet.iter_rows(values_only=True))
    header = values[0]
    rows = [dict(zip(header, v, strict=True)) for v in values[1:]]
    assert rows[-1]["Period start"] == "Total"
    return rows[:-1], rows[-1], sheet


def exact(value) -> Decimal:
    """A number read back from the workbook as the decimal it was written as."""
    return D(repr(value)) if isinstance(value, float) else D(value)


@pytest.mark.parametrize("level", ["project", "program", "organization"])
def test_csv_totals_equal_the_ledger(october, level):
    rows, totals = parse_csv(report_csv(report=report_for(october.finance, level=level)))
    ledger = ledger_total(OCT_START, NOV_START)
    assert D(totals["Total GPU-seconds"]) == ledger == D("3616200.750001")
    assert sum(D(r["Total GPU-seconds"]) for r in rows) == ledger
    for name in SECONDS:
        assert D(totals[name]) == sum(D(r[name]) for r in rows), name
    assert D(totals["Cost (USD)"]) == D("4510.00") == sum(D(r["Cost (USD)"]) for r in rows)
    by_charge = {
        charge: ledger_total(OCT_START, NOV_START, charge=charge)
        for charge in ("budgeted", "burst", "free")
    }
    assert D(totals["Budgeted GPU-seconds"]) == by_charge["budgeted"]
    assert D(totals["Burst GPU-seconds"]) == by_charge["burst"]
    assert D(totals["Free GPU-seconds"]) == by_charge["free"]


def test_csv_project_rows_carry_names_cost_centres_and_hours(october):
    rows, totals = parse_csv(report_csv(report=report_for(october.finance)))
    detection = next(r for r in rows if r["Project"] == "Detection")
    assert detection["Program"] == "Vision"
    assert detection["Organization"] == "Acme Research"
    assert detection["Cost centre"] == "CC-DET"
    assert detection["Cluster"] == "h100"
    assert detection["Period start"] == "2026-10-01"
    assert detection["Period end"] == "2026-10-31"
    assert detection["Total GPU-hours"] == "4.500208"  # 16200.75 / 3600, to the millionth
    assert totals["Total GPU-hours"] == "1004.500208"


@pytest.mark.parametrize("level", ["project", "program", "organization"])
def test_xlsx_totals_equal_the_ledger(october, level):
    rows, totals, _ = parse_xlsx(report_xlsx(report=report_for(october.finance, level=level)))
    ledger = ledger_total(OCT_START, NOV_START)
    assert exact(totals["Total GPU-seconds"]) == ledger
    assert sum(exact(r["Total GPU-seconds"]) for r in rows) == ledger
    assert exact(totals["Budgeted GPU-seconds"]) == ledger_total(
        OCT_START, NOV_START, charge="budgeted"
    )
    assert exact(totals["Cost (USD)"]) == D("4510.00")


def test_xlsx_has_number_formats_dates_and_a_bold_totals_row(october):
    rows, _, sheet = parse_xlsx(report_xlsx(report=report_for(october.finance)))
    assert [r["Project"] for r in rows] == ["Translation", "Detection", "Segmentation"]
    assert rows[0]["Period start"].date() == date(2026, 10, 1)
    header = [c.value for c in sheet[1]]
    last = sheet.max_row
    hours = sheet.cell(row=2, column=header.index("Total GPU-hours") + 1)
    assert hours.number_format == "#,##0.00"
    assert hours.value == 1000
    cost = sheet.cell(row=last, column=header.index("Cost (USD)") + 1)
    assert cost.number_format == "#,##0.00"
    assert cost.font.bold
    assert sheet.cell(row=last, column=1).value == "Total"
    assert sheet.freeze_panes == "A2"


def test_empty_period_exports_a_zero_totals_row(october):
    report = report_for(october.finance, period=(date(2025, 1, 1), date(2025, 1, 31)))
    rows, totals = parse_csv(report_csv(report=report))
    assert rows == []
    assert D(totals["Total GPU-seconds"]) == 0
    rows, totals, _ = parse_xlsx(report_xlsx(report=report))
    assert rows == []
    assert exact(totals["Total GPU-seconds"]) == 0
    assert OCTOBER[0] == date(2026, 10, 1)


def test_csv_numbers_have_at_most_six_decimals(october):
    # The ledger keeps GPU-seconds to the microsecond, but a database may sum to a longer
    # scale: SQLite (``make run``) gave 2196.94497600000 and the CSV printed it as such.
    report = report_for(october.finance)
    report.rows[0].budgeted_gpu_seconds = D("2196.94497600000")
    rows, totals = parse_csv(report_csv(report=report))
    assert rows[0]["Budgeted GPU-seconds"] == "2196.944976"
    for row in [*rows, totals]:
        for name in SECONDS:
            whole, _, fraction = row[name].partition(".")
            assert whole.isdigit() and len(fraction) <= 6, (name, row[name])
