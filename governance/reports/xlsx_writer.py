"""XLSX export of the finance usage report (openpyxl, write-only for speed).

Numbers are written as numbers with formats (GPU-hours ``#,##0.00``, cost ``#,##0.00``,
GPU-seconds ``#,##0.000000``), a bold totals row closes the sheet, the header row is frozen
and filterable. openpyxl stores a ``Decimal`` with all its digits; a spreadsheet shows at
most 15 significant digits (the CSV is the exact copy).
"""

from __future__ import annotations

import io
from datetime import date

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter

from governance.reports.columns import report_columns
from governance.selectors.reports import UsageReport

FORMATS = {
    "date": "yyyy-mm-dd",
    "hours": "#,##0.00",
    "money": "#,##0.00",
    "seconds": "#,##0.000000",
}
WIDTHS = {"date": 12, "text": 22, "hours": 16, "money": 14, "seconds": 20}


def report_xlsx(*, report: UsageReport) -> bytes:
    """The report as an XLSX workbook (one sheet "Usage", then "About" with the definitions)."""
    columns = report_columns(report)
    book = Workbook(write_only=True)
    sheet = book.create_sheet("Usage")
    sheet.freeze_panes = "A2"
    for index, column in enumerate(columns, start=1):
        sheet.column_dimensions[get_column_letter(index)].width = WIDTHS[column.kind]
    bold = Font(bold=True)

    def cell(value, kind: str, *, strong: bool = False) -> WriteOnlyCell:
        c = WriteOnlyCell(sheet, value=value)
        if kind == "text" and isinstance(value, str):
            # openpyxl stores a string starting with "=" as a formula; names are text, never
            # formulas (a project named =HYPERLINK(...) must not run in finance's spreadsheet).
            c.data_type = "s"
        if kind in FORMATS and value is not None and value != "":
            c.number_format = FORMATS[kind]
        if strong:
            c.font = bold
        return c

    sheet.append([cell(c.header, "text", strong=True) for c in columns])
    formats = [(c.value, c.kind) for c in columns]
    for row in report.rows:
        sheet.append([cell(value(row), kind) for value, kind in formats])
    totals = report.totals
    last = []
    for index, (value, kind) in enumerate(formats):
        if index == 0:
            last.append(cell("Total", "text", strong=True))
        elif kind in ("hours", "money", "seconds"):
            last.append(cell(value(totals), kind, strong=True))
        elif kind == "date":
            last.append(cell(totals.period_end, kind, strong=True))
        else:
            last.append(cell("", "text"))
    sheet.append(last)
    if report.rows:
        sheet.auto_filter.ref = f"A1:{get_column_letter(len(columns))}{len(report.rows) + 1}"

    about = book.create_sheet("About")
    about.column_dimensions["A"].width = 110
    for line in _about_lines(report):
        about.append([line])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _about_lines(report: UsageReport) -> list[str]:
    return [
        f"{report.title}, by {report.level}, "
        f"{'cluster ' + report.cluster.name if report.cluster else 'all clusters'} "
        f"(UTC days, {report.start:%Y-%m-%d} to {report.end:%Y-%m-%d} included).",
        f"Made {date.today():%Y-%m-%d}.",
        "Budgeted: charged GPU time within the project's entitlement in each hour.",
        "Burst: charged GPU time above the entitlement (all charged time of a project with "
        "no share).",
        "Free: free-lane time (minimum runtime 0), preemptible and not charged to budgets.",
        "Cost: total GPU-hours x the rate per GPU-hour of the cluster's GPU type in force "
        "at the start of each hour, rounded to cents per project, month and cluster.",
        "GPU-seconds columns are the ledger's exact amounts; the totals row equals the ledger.",
        "GPU-hours allocated but idle: allocated minus busy GPU-hours of the hours the node "
        "agents measured (GPU telemetry); empty where nothing was measured. Idle time is "
        "charged like any other: it is part of the GPU-hours above, not extra.",
        *report.warnings,
    ]
