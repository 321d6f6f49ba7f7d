"""The rows of the finance usage report's table, written as HTML in Python.

A month's report at project level lists every project on every cluster: 600 rows for 300
projects on two clusters. Through the template engine each row's eleven cells (one of them
a date filter) cost about 0.2 ms, most of the page's time; written here, as the dashboards'
long tables are (``dashboard_rows``), a row costs a few microseconds. Every value from the
database is escaped; the markup is the one the template had.
"""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe

from governance.views.dashboard_rows import DASH, NO_TELEMETRY, escape


def report_row_html(row, cells: dict[str, str], *, level: str) -> SafeString:
    """One row of the report (``selectors.reports.ReportRow``) with its formatted figures
    (``views.reports._cells``), with the columns of ``level``."""
    month = f"{row.period_start:%Y-%m}" if row.period_start else ""
    parts = [f'<tr><td class="nowrap small">{month}</td>']
    if level == "organization":
        parts.append(f"<td>{escape(row.organization)}</td>")
    else:
        parts.append(f"<td>{escape(row.program)}</td>")
    if level == "project":
        parts.append(f"<td>{escape(row.project)}</td>")
        parts.append(f'<td class="small">{escape(row.cost_centre or DASH)}</td>')
    parts.append(f'<td class="small">{escape(row.cluster)}</td>')
    parts.append(f'<td class="num">{escape(cells["budgeted"])}</td>')
    parts.append(f'<td class="num">{escape(cells["burst"])}</td>')
    parts.append(f'<td class="num">{escape(cells["free"])}</td>')
    parts.append(f'<td class="num"><strong>{escape(cells["total"])}</strong></td>')
    parts.append(f'<td class="num">{escape(cells["cost"])}</td>')
    idle = cells["idle"]
    parts.append(
        f'<td class="num">{escape(idle)}</td></tr>'
        if idle != DASH
        else f'<td class="num">{NO_TELEMETRY}</td></tr>'
    )
    return mark_safe("".join(parts))  # every value above is escaped
