"""What-if on a hand-built history: both replays see the same trace; only the tree differs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.choices import WorkloadState
from scheduler.selectors.whatif import what_if
from tests.scheduler.conftest import build_world
from tests.scheduler.test_ledger_trace import E, H, workload

pytestmark = pytest.mark.django_db


def history():
    """Two teams at 50 % each on 16 GPUs; over the last day both kept asking for all of it."""
    world = build_world(nodes=2, shares={"x": "50", "y": "50"})
    for team in ("x", "y"):
        world.projects["budgeted"] = world.projects[team]
        for i in range(6):
            at = E - timedelta(hours=20) + i * H
            runs = [(at, at + 4 * H)]
            workload(world, f"{team}{i}", WorkloadState.SUCCEEDED, at, runs=runs, gpus=8)
    return world


def test_identical_trees_give_identical_figures():
    world = history()
    result = what_if(cluster=world.cluster, proposed={}, end=E, days=2)
    assert result.jobs == 12 and (result.gpus, result.gpus_per_node) == (16, 8)
    assert [t.project for t in result.teams] == ["research/x", "research/y"]
    assert all(t.today == t.proposed for t in result.teams)
    assert result.summary == "Nothing changes for any team."


def test_a_larger_share_is_owed_more_and_the_sentence_says_what_changes():
    world = history()
    moved = {("project", world.projects["x"].id): 25, ("project", world.projects["y"].id): 75}
    result = what_if(cluster=world.cluster, proposed=moved, end=E, days=2)
    x, y = result.teams
    assert y.proposed.owed_gpu_hours > y.today.owed_gpu_hours
    assert x.proposed.owed_gpu_hours < x.today.owed_gpu_hours
    assert y.proposed.delivered_of_owed_gpu_hours >= y.today.delivered_of_owed_gpu_hours
    assert result.summary != "Nothing changes for any team."
