"""CSV export of the finance usage report: one header line, the rows, a totals line."""

from __future__ import annotations

import csv
import io

from governance.reports.columns import report_columns
from governance.selectors.reports import UsageReport

# A cell starting with one of these is a formula to a spreadsheet (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _text(value) -> str:
    if value is None:
        return ""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _safe_text(value) -> str:
    """A name as inert text: one that starts like a formula gets a leading apostrophe.

    Names (organization, program, project, cost centre) are typed by people; opened in a
    spreadsheet, ``=HYPERLINK(...)`` would otherwise run as a formula. Numbers are not text
    columns and are written untouched.
    """
    text = _text(value)
    return f"'{text}" if text.startswith(FORMULA_START) else text


def report_csv(*, report: UsageReport) -> str:
    """The report as CSV text (UTF-8, comma separated, plain decimals with a dot).

    Numbers carry no thousands separators so any spreadsheet parses them. The last line is
    the totals ("Total" in the first column); its GPU-seconds equal the ledger's sum.
    """
    columns = report_columns(report)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.header for c in columns])
    for row in report.rows:
        writer.writerow(
            [(_safe_text if c.kind == "text" else _text)(c.value(row)) for c in columns]
        )
    totals = report.totals
    line = []
    for index, column in enumerate(columns):
        if index == 0:
            line.append("Total")
        elif column.kind in ("hours", "money", "seconds"):
            line.append(_text(column.value(totals)))
        elif column.kind == "date":
            line.append(_text(totals.period_end))
        else:
            line.append("")
    writer.writerow(line)
    return out.getvalue()
