"""The rows of cluster health's per-project utilization table, written as HTML in Python.

An org admin of 300 projects gets 300 rows; through the template engine their cells would
cost most of the page's time (as ``dashboard_rows`` explains), written here a few
microseconds each. Figures are formatted as the ``govfmt`` filters write them, from floats
(display only: the selectors keep the exact ``Decimal``s). Every name is escaped.
"""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe

from governance.views.dashboard_rows import DASH, NO_TELEMETRY, escape


def gpu_hours(value) -> str:
    """GPU-hours as ``govfmt.gpus`` writes them: "1,234.5", whole numbers bare, "< 0.1"."""
    number = float(value)
    if 0 < number < 0.05:
        return "< 0.1"
    rounded = round(number, 1)
    return f"{int(rounded):,}" if rounded == int(rounded) else f"{rounded:,.1f}"


def ratio_percent(ratio) -> str:
    """A ratio (0..1) as ``govfmt.pct`` writes its percent: "42.10 %", "< 0.01 %", "—"."""
    if ratio is None:
        return DASH
    number = float(ratio) * 100
    if 0 < number < 0.005:
        return "< 0.01 %"
    return f"{number:,.2f} %"


def project_utilization_row_html(row) -> SafeString:
    """One project (``selectors.health_utilization.ProjectUtilization``): utilization,
    busy and allocated-but-idle GPU-hours, measured vs ledger GPU-hours and coverage."""
    name = f'<td>{escape(row.name)}<div class="muted small">{escape(row.program)}</div></td>'
    ledger = f'<td class="num hide-narrow">{gpu_hours(row.ledger_allocated_gpu_hours)}</td>'
    start = f'<tr data-project="{int(row.project_id)}">{name}'
    if not row.measured:
        return mark_safe(  # the names are escaped, the rest are numbers
            f'{start}<td class="num" data-testid="project-utilization">{NO_TELEMETRY}</td>'
            f'<td class="num hide-narrow">{DASH}</td><td class="num">{DASH}</td>'
            f'<td class="num hide-narrow">{DASH}</td>{ledger}'
            '<td class="num hide-narrow">0.00 %</td></tr>'
        )
    use = row.telemetry
    return mark_safe(  # the names are escaped, the rest are numbers
        f'{start}<td class="num" data-testid="project-utilization">{ratio_percent(row.utilization)}</td>'
        f'<td class="num hide-narrow">{gpu_hours(use.busy_gpu_hours)}</td>'
        f'<td class="num" data-testid="project-idle">{gpu_hours(use.idle_gpu_hours)}</td>'
        f'<td class="num hide-narrow">{gpu_hours(use.allocated_gpu_hours)}</td>'
        f"{ledger}"
        f'<td class="num hide-narrow" data-testid="project-coverage">{ratio_percent(row.coverage)}</td>'
        "</tr>"
    )
