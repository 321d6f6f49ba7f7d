"""Exports: names are never formulas (CSV injection) in the CSV or XLSX report."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client
from openpyxl import load_workbook

from tests.governance.test_reports_selector import october_fixture  # noqa: F401

pytestmark = pytest.mark.django_db


# --- Exports: names are never formulas (CSV injection) -------------------------------------------

FORMULA = '=HYPERLINK("http://evil.example","Detection")'


def _export(october, fmt: str) -> bytes:
    """Finance's October report (tests/governance/test_reports_selector.py), Detection renamed."""
    october.project_a1.name = FORMULA
    october.project_a1.save(update_fields=["name"])
    client = Client()
    client.force_login(october.finance)
    response = client.get(f"/reports/usage.{fmt}", {"month": "2026-10", "level": "project"})
    assert response.status_code == 200
    return response.content


def test_a_formula_in_a_name_is_inert_in_the_csv_export(october):
    text = _export(october, "csv").decode("utf-8-sig")
    cells = [cell for row in csv.reader(io.StringIO(text)) for cell in row]
    assert "'" + FORMULA in cells  # shown as text by every spreadsheet
    assert FORMULA not in cells
    assert "CC-DET" in cells  # other names are untouched


def test_a_formula_in_a_name_is_text_in_the_xlsx_export(october):
    sheet = load_workbook(io.BytesIO(_export(october, "xlsx")))["Usage"]
    cells = [cell for row in sheet.iter_rows() for cell in row if cell.value == FORMULA]
    assert cells, "Detection's row is in the export"
    assert all(cell.data_type == "s" for cell in cells)  # a string, not a formula ("f")
