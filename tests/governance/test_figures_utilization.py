"""The utilization figures (cluster health's level 4, a workload's trace): checked by Plotly,
gaps where nothing was measured, never a made-up 0 %."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

from governance import figures_dashboards as builders
from governance.selectors.health_utilization import UtilizationDay
from governance.selectors.telemetry import Telemetry
from tests.governance.test_figures_dashboards import plotted

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def test_health_utilization_per_day_with_coverage_and_gaps():
    days = [
        # 25,920 busy of 46,800 measured, 57,600 in the ledger.
        UtilizationDay(
            Telemetry(Decimal(46800), Decimal(25920)), Decimal(57600), day=date(2026, 3, 1)
        ),
        UtilizationDay(Telemetry(), Decimal(3600), day=date(2026, 3, 2)),  # nothing measured
        UtilizationDay(Telemetry(Decimal(7200), Decimal(7200)), Decimal(0), day=date(2026, 3, 3)),
    ]
    figure = plotted(builders.health_utilization(days))
    utilization, coverage = figure.data
    assert list(utilization.y) == [55.38, None, 100.0]
    assert list(coverage.y) == [81.25, 0.0, None]  # measured nothing of 1 GPU-h; no ledger
    assert figure.layout.yaxis.range == (0, 105)


def test_run_trace_breaks_over_unmeasured_hours():
    hours = [
        {"hour": T0, "utilization": Decimal("0.5")},
        {"hour": T0 + timedelta(hours=1), "utilization": Decimal("0.1")},
        {"hour": T0 + timedelta(hours=4), "utilization": Decimal("0")},
    ]
    traces = [
        SimpleNamespace(run=SimpleNamespace(attempt=1), hours=[]),  # no telemetry: left out
        SimpleNamespace(run=SimpleNamespace(attempt=2), hours=hours),
    ]
    figure = plotted(builders.run_utilization_lines(traces))
    (line,) = figure.data
    assert line.name == "Run 2"
    assert list(line.y) == [50.0, 10.0, None, 0.0]
    assert list(line.x)[2] == T0 + timedelta(hours=2)
    assert figure.layout.showlegend is False
