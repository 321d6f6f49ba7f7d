"""The tree sunburst: its data (ids, labels, parents, values), from real selector rows."""

from __future__ import annotations

from decimal import Decimal

import plotly.graph_objects as go
import pytest

from governance.figures import HIDDEN_LABEL, UNALLOCATED_LABEL, figure_json, tree_sunburst
from governance.selectors.tree import TreeNode, tree_for
from governance.selectors.visibility import user_visibility


def trace_of(figure: dict):
    """The sunburst trace of a builder's plain figure, loaded into Plotly (which refuses any
    property it does not know); ``figure_json`` must write what Plotly writes of it."""
    checked = go.Figure(figure)
    assert figure_json(figure) == figure_json(checked)
    return checked.data[0]


def by_label(trace):
    return {
        (label, parent): value
        for label, parent, value in zip(trace.labels, trace.parents, trace.values, strict=True)
    }


@pytest.mark.django_db
def test_org_admin_sunburst_has_every_node_and_the_unallocated_rest(personas):
    root = tree_for(visibility=user_visibility(user=personas.org_admin), cluster=personas.cluster)
    trace = trace_of(tree_sunburst(root, cluster_gpus=personas.cluster.total_gpus))
    assert trace.type == "sunburst"
    assert trace.branchvalues == "total"
    labels = list(trace.labels)
    for name in ["Acme Research", "Vision", "Language", "Detection", "Segmentation"]:
        assert name in labels
    values = dict(zip(trace.ids, trace.values, strict=True))
    org = f"organization-{personas.organization.pk}"
    vision = f"program-{personas.program_a.pk}"
    assert values[org] == 100
    assert values[vision] == 60
    assert values[f"project-{personas.project_a1.pk}"] == 30  # 50 % of 60 %
    assert values[f"unallocated-{vision}"] == 12  # 20 % of 60 %
    parents = dict(zip(trace.ids, trace.parents, strict=True))
    assert parents[f"project-{personas.project_a1.pk}"] == vision
    assert parents[vision] == org
    # Language is fully split: no unallocated wedge under it, none under the organization.
    assert f"unallocated-program-{personas.program_b.pk}" not in values
    assert f"unallocated-{org}" not in values


@pytest.mark.django_db
def test_hover_data_carries_share_of_parent_and_gpus(personas):
    root = tree_for(visibility=user_visibility(user=personas.org_admin), cluster=personas.cluster)
    trace = trace_of(tree_sunburst(root, cluster_gpus=32))
    custom = dict(zip(trace.ids, (list(c) for c in trace.customdata), strict=True))
    # Detection: 50 % of Vision, 30 % of the cluster, 9.6 of 32 GPUs.
    assert custom[f"project-{personas.project_a1.pk}"] == [50.0, 30.0, 9.6]


@pytest.mark.django_db
def test_pi_sunburst_groups_what_the_pi_cannot_see(personas):
    root = tree_for(visibility=user_visibility(user=personas.pi), cluster=personas.cluster)
    trace = trace_of(tree_sunburst(root, cluster_gpus=32))
    rows = by_label(trace)
    assert "Language" not in trace.labels and "Segmentation" not in trace.labels
    assert rows[("Detection", f"program-{personas.program_a.pk}")] == 30
    # The rest of Vision (Segmentation + unallocated = 30 %) and Language (40 %) are hidden.
    assert rows[(HIDDEN_LABEL, f"program-{personas.program_a.pk}")] == 30
    assert rows[(HIDDEN_LABEL, f"organization-{personas.organization.pk}")] == 40
    assert UNALLOCATED_LABEL not in trace.labels


class Obj:
    def __init__(self, pk, name):
        self.pk, self.name = pk, name


def test_rounding_never_makes_children_larger_than_their_parent():
    """Three thirds of a third: Plotly drops a ring whose children exceed it, so we must not."""
    third = Decimal("33.33")
    children = [
        TreeNode(
            kind="project",
            obj=Obj(i, f"P{i}"),
            share=Decimal("33.34"),
            effective_share=third * Decimal("33.34") / 100,
            gpus_entitled=0.0,
        )
        for i in range(3)
    ]
    program = TreeNode(
        kind="program",
        obj=Obj(1, "Prog"),
        share=third,
        effective_share=third,
        gpus_entitled=0.0,
        unallocated=Decimal("-0.02"),
        children=children,
    )
    root = TreeNode(
        kind="organization",
        obj=Obj(1, "Org"),
        share=Decimal(100),
        effective_share=Decimal(100),
        gpus_entitled=0.0,
        unallocated=Decimal("66.67"),
        children=[program],
    )
    trace = trace_of(tree_sunburst(root, cluster_gpus=8))
    values = dict(zip(trace.ids, trace.values, strict=True))
    kids = sum(values[f"project-{i}"] for i in range(3))
    assert values["program-1"] >= kids
    assert values["organization-1"] >= values["program-1"] + values["unallocated-organization-1"]


def test_figure_json_is_plain_data_for_json_script():
    root = TreeNode(
        kind="organization",
        obj=Obj(1, "Org"),
        share=Decimal(100),
        effective_share=Decimal(100),
        gpus_entitled=8.0,
        unallocated=Decimal(100),
    )
    data = figure_json(tree_sunburst(root, cluster_gpus=8))
    assert data["data"][0]["labels"] == ["Org", UNALLOCATED_LABEL]
    assert data["data"][0]["values"] == [100, 100]
