"""The usage report and its exports (page, CSV, XLSX, API): the idle column.

The day and its figures: ``world.py``.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from decimal import Decimal

import openpyxl
import pytest

from tests.governance.utilization_pages.world import (
    IDLE_HEADER,
    REPORT,
    client_for,
    ledger,
    yesterday,
)

pytestmark = pytest.mark.django_db


def month_of(day: datetime) -> str:
    return f"{day:%Y-%m}"


def test_report_idle_column_page_csv_xlsx_and_api(personas, world):
    from rest_framework.test import APIClient

    query = {"month": month_of(world["day"]), "level": "project"}
    client = client_for(personas.finance)
    page = client.get(REPORT, query)
    assert page.status_code == 200
    rows = {row.project: row for row in page.context["report"].rows}
    assert rows["Detection"].idle_gpu_seconds == Decimal("20880")
    assert rows["Translation"].idle_gpu_seconds == 0
    assert rows["Segmentation"].idle_gpu_seconds is None
    assert page.context["report"].totals.idle_gpu_seconds == Decimal("20880")
    html = page.content.decode()
    assert "Allocated but idle GPU" in html and "Idle time is charged like any other" in html

    lines = list(
        csv.DictReader(io.StringIO(client.get("/reports/usage.csv", query).content.decode()))
    )
    header = list(lines[0])
    assert header[-1] == IDLE_HEADER and "Total GPU-seconds" in header  # added, none renamed
    by_project = {line["Project"]: line[IDLE_HEADER] for line in lines[:-1]}
    assert by_project == {"Detection": "5.800000", "Translation": "0.000000", "Segmentation": ""}
    assert lines[-1][IDLE_HEADER] == "5.800000"

    book = openpyxl.load_workbook(io.BytesIO(client.get("/reports/usage.xlsx", query).content))
    sheet = book["Usage"]
    heads = [cell.value for cell in sheet[1]]
    column = heads.index(IDLE_HEADER) + 1
    assert column == len(heads)
    assert sheet.cell(row=sheet.max_row, column=column).value == 5.8  # a number cell

    api = APIClient()
    api.force_login(personas.finance)
    body = api.get("/api/reports/usage/", query).json()
    idle = {row["project"]: row["idle_gpu_hours"] for row in body["rows"]}
    assert idle == {"Detection": "5.800000", "Translation": "0.000000", "Segmentation": None}
    assert body["totals"]["idle_gpu_seconds"] == "20880.000000"


def test_report_program_level_adds_only_measured_projects(personas, world):
    query = {"month": month_of(world["day"]), "level": "program"}
    report = client_for(personas.org_admin).get(REPORT, query).context["report"]
    assert {row.program: row.idle_gpu_seconds for row in report.rows} == {
        "Vision": Decimal("20880"),
        "Language": Decimal("0"),
    }


def test_report_without_telemetry_says_so(personas):
    day = yesterday()
    ledger(personas, personas.project_a1, day + timedelta(hours=10), budgeted=3600)
    query = {"month": month_of(day)}
    client = client_for(personas.finance)
    report = client.get(REPORT, query).context["report"]
    assert [row.idle_gpu_seconds for row in report.rows] == [None]
    lines = list(
        csv.DictReader(io.StringIO(client.get("/reports/usage.csv", query).content.decode()))
    )
    assert {line[IDLE_HEADER] for line in lines} == {""}


@pytest.mark.parametrize(
    "url,query",
    [
        (REPORT, {"month": "2026-13"}),
        ("/reports/usage.csv", {"level": "team"}),
        ("/reports/usage.xlsx", {"period": "range", "start": "2026-02-30", "end": "2026-03-01"}),
        ("/api/reports/usage/", {"month": "not-a-month"}),
    ],
)
def test_bad_report_query_is_a_400(personas, world, url, query):
    from rest_framework.test import APIClient

    if url.startswith("/api/"):
        api = APIClient()
        api.force_login(personas.finance)
        assert api.get(url, query).status_code == 400
    else:
        assert client_for(personas.finance).get(url, query).status_code == 400
