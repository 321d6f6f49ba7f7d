"""The browser's Plotly bundle matches the figures the Python side writes, and holds every
trace type they use."""

from __future__ import annotations

import re
from pathlib import Path

import plotly.graph_objects as go
from plotly.basedatatypes import BaseTraceType
from plotly.offline import get_plotlyjs_version

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "static" / "vendor" / "plotly" / "plotly-governance.min.js"
# Trace types the bundle registers (make plotly-bundle): scatter is in plotly.js's core.
BUNDLED_TRACES = {"Scatter", "Bar", "Sunburst", "Heatmap"}


def test_the_bundle_is_the_plotly_js_version_the_plotly_package_writes_figures_for():
    banner = BUNDLE.read_text(encoding="utf-8")[:300]
    assert f"plotly.js v{get_plotlyjs_version()} " in banner, (
        "static/vendor/plotly/plotly-governance.min.js is stale: run make plotly-bundle"
    )


def test_every_trace_type_the_pages_draw_is_in_the_bundle():
    used = set()
    # The simulator's figures too: the web page of a simulation draws them with the bundle.
    for package in ("governance", "scheduler"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            used |= set(re.findall(r"\bgo\.([A-Z]\w+)\(", text))
            # Figures written as plain data name their trace type: {"type": "bar", …}.
            used |= {t.capitalize() for t in re.findall(r"\"type\": \"(\w+)\"", text)}
    # Only trace types need the bundle's code; figures and layouts are plain data to it (an
    # axis's "type": "date" is no class of Plotly's).
    traces = {
        name
        for name in used
        if isinstance(getattr(go, name, None), type)
        and issubclass(getattr(go, name), BaseTraceType)
    }
    assert traces <= BUNDLED_TRACES, used
    assert {"Bar", "Sunburst", "Heatmap"} <= traces  # the rules find what the pages draw
    banner = BUNDLE.read_text(encoding="utf-8")[:300]  # make plotly-bundle names its traces
    assert all(name.lower() in banner for name in BUNDLED_TRACES), banner
    # The rule tells the two apart: a violin would need the bundle rebuilt, a layout not.
    assert issubclass(go.Violin, BaseTraceType) and not issubclass(go.Layout, BaseTraceType)
