"""Plotly figure builders: pure functions from selector rows to a Plotly figure as plain data.

They read nothing from the database and draw nothing: the page serializes the figure to JSON
(``figure_json``) and ``static/js/figure.js`` draws it with the self-hosted Plotly bundle (``static/vendor/plotly``).
A figure is the dict Plotly.js takes — ``{"data": [trace, …], "layout": {…}}``, each trace
with its ``type`` — not a ``plotly.graph_objects.Figure``: building and validating those
objects cost 5 to 15 ms a chart, most of a dashboard's Python. Tests load each figure into
``plotly.graph_objects.Figure``, which refuses any property Plotly does not know, and check
that ``figure_json`` writes exactly what Plotly's own serializer writes.
Tests assert on the figure's data (labels, parents, values), never on HTML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from functools import cache

# Calm, distinguishable program colours; projects take a lighter tint of their program's.
PROGRAM_COLOURS = ["#2a7f84", "#3b6fb6", "#a1662f", "#6b5fb5", "#4d8a3a", "#b0546b", "#5f7a8c"]
ROOT_COLOUR = "#e3e9f0"
UNALLOCATED_COLOUR = "#e4e7eb"
HIDDEN_COLOUR = "#c9ced6"
DARK_TEXT = "#1f2933"
LIGHT_TEXT = "#ffffff"
# The pages' own font stack, in every chart.
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13}
UNALLOCATED_LABEL = "Unallocated"
HIDDEN_LABEL = "Not visible to you"
# Below this (percent of the cluster) a rest is rounding noise, not a wedge worth drawing.
EPSILON = 0.005


def _tint(hex_colour: str, amount: float) -> str:
    """Mix ``hex_colour`` with white by ``amount`` (0 = unchanged, 1 = white)."""
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    mix = [round(c + (255 - c) * amount) for c in (red, green, blue)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def _node_id(node) -> str:
    return f"{node.kind}-{node.obj.pk}"


@dataclass
class _Wedges:
    """A sunburst's wedges as Plotly's parallel lists, each parent before its children."""

    cluster_gpus: int
    ids: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    colours: list[str] = field(default_factory=list)
    text_colours: list[str] = field(default_factory=list)
    # Per wedge: percent of its parent, percent of the cluster, GPUs (the hover's figures).
    customdata: list[list] = field(default_factory=list)

    def add(
        self,
        node_id: str,
        label: str,
        parent_id: str,
        value: float,
        colour: str,
        share_of_parent: float,
        text_colour: str = DARK_TEXT,
    ) -> None:
        """Append one wedge of ``value`` percent of the cluster."""
        self.ids.append(node_id)
        self.text_colours.append(text_colour)
        self.labels.append(label)
        self.parents.append(parent_id)
        self.values.append(round(value, 4))
        self.colours.append(colour)
        self.customdata.append(
            [
                round(share_of_parent, 2),
                round(value, 2),
                round(value / 100 * self.cluster_gpus, 1),
            ]
        )

    def walk(self, node, parent_id: str, colour: str) -> float:
        """Add ``node`` and its subtree; return the value given to ``node``."""
        node_id = _node_id(node)
        effective = float(node.effective_share)
        position = len(self.ids)
        text_colour = LIGHT_TEXT if node.kind == "program" else DARK_TEXT
        self.add(
            node_id, node.obj.name, parent_id, effective, colour, float(node.share), text_colour
        )
        children_total = 0.0
        for index, child in enumerate(node.children):
            if node.kind == "organization":
                child_colour = PROGRAM_COLOURS[index % len(PROGRAM_COLOURS)]
            else:
                child_colour = _tint(colour, 0.35 + 0.12 * (index % 4))
            children_total += self.walk(child, node_id, child_colour)
        if node.kind != "project":
            unallocated = self._rests(node, node_id, effective, children_total)
            # Rounding must never make a ring larger than its parent (Plotly would drop it).
            self.values[position] = round(max(effective, children_total + unallocated), 4)
        return self.values[position]

    def _rests(self, node, node_id: str, effective: float, children_total: float) -> float:
        """Add the "Unallocated" and "Not visible to you" wedges of a parent; return the
        unallocated value."""
        unallocated = max(0.0, effective * float(node.unallocated or 0) / 100)
        if unallocated > EPSILON:
            self.add(
                f"unallocated-{node_id}",
                UNALLOCATED_LABEL,
                node_id,
                unallocated,
                UNALLOCATED_COLOUR,
                float(node.unallocated),
            )
        hidden = effective - unallocated - children_total
        if hidden > EPSILON:
            self.add(
                f"hidden-{node_id}",
                HIDDEN_LABEL,
                node_id,
                hidden,
                HIDDEN_COLOUR,
                hidden / effective * 100 if effective else 0.0,
            )
        return unallocated


def tree_sunburst(root, *, cluster_gpus: int) -> dict:
    """A sunburst of effective shares (percent of the whole cluster) from a ``tree_for`` root.

    ``root`` is a TreeNode-like row: ``kind``, ``obj``, ``share``, ``effective_share``,
    ``unallocated`` and ``children``. Each parent also gets an "Unallocated" wedge for the rest
    its children do not hold and, when the viewer sees only some children, a "Not visible to
    you" wedge for theirs — so every ring adds up to its parent and nothing is guessed.
    Values are percents of the cluster; hover shows share of parent, percent of cluster and
    GPUs (effective share times ``cluster_gpus``).
    """
    wedges = _Wedges(cluster_gpus=cluster_gpus)
    wedges.walk(root, "", ROOT_COLOUR)
    sunburst = {
        "type": "sunburst",
        "ids": wedges.ids,
        "labels": wedges.labels,
        "parents": wedges.parents,
        "values": wedges.values,
        "branchvalues": "total",
        "marker": {"colors": wedges.colours, "line": {"color": "#ffffff", "width": 1.5}},
        "textfont": {"color": wedges.text_colours},
        "insidetextfont": {"color": wedges.text_colours},
        "customdata": wedges.customdata,
        "hovertemplate": (
            "<b>%{label}</b><br>%{customdata[0]:.2f} % of parent"
            "<br>%{customdata[1]:.2f} % of the cluster"
            "<br>%{customdata[2]:,.1f} GPUs<extra></extra>"
        ),
        "texttemplate": "%{label}<br>%{customdata[1]:.1f} %",
        "insidetextorientation": "horizontal",
        "sort": False,
    }
    layout = {
        "margin": {"t": 8, "l": 8, "r": 8, "b": 8},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "font": FONT,
    }
    return {"data": [sunburst], "layout": layout}


@cache
def _default_template() -> dict:
    """Plotly's default template as plain data: what ``plotly.graph_objects.Figure`` puts in
    every figure's layout (the look the pages were designed with). Built once."""
    import plotly.io as pio

    template = pio.templates[pio.templates.default]
    return json.loads(pio.json.to_json_plotly(template.to_plotly_json()))


def _plain(value):
    """``value`` with dates as ISO text and Decimals as floats, as Plotly's serializer writes
    them (datetimes keep their offset: ``2026-03-01T00:00:00+00:00``)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def figure_json(figure) -> dict:
    """The figure as plain JSON data for ``json_script``, with every text of its traces made
    plain text (``plain_text_traces``) and Plotly's default template in its layout.

    ``figure`` is a plain figure (``{"data": …, "layout": …}``, as the builders here return)
    or a ``plotly.graph_objects.Figure``; both give the same data."""
    if isinstance(figure, dict):
        data = _plain(figure)
        layout = data.setdefault("layout", {})
        if "template" not in layout:
            layout["template"] = _default_template()
    else:
        data = json.loads(figure.to_json(validate=False))
    data["data"] = plain_text_traces(data.get("data", []))
    return data


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plain_text_traces(traces):
    """The traces with ``&``, ``<`` and ``>`` escaped in every string, so a name from an upload
    or the tree (``<a href=…>``, ``<b>``) is shown as typed, never as Plotly markup. Only our
    own ``…template`` strings (hover and text templates, which use ``<b>`` and ``<br>`` on
    purpose) are left as they are. Plotly shows the escaped entities as the characters."""

    def clean(value, key=""):
        if isinstance(value, str):
            return value if key.endswith("template") else _escape(value)
        if isinstance(value, list):
            return [clean(item, key) for item in value]
        if isinstance(value, dict):
            return {k: clean(v, k) for k, v in value.items()}
        return value

    return clean(traces)
