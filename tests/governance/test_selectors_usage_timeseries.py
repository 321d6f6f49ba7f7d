"""The usage time series (per hour, per day) of a node of the tree, on the hand-worked
scenario of ``test_selectors_usage.py`` (its docstring has the figures)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import PermissionDenied

from governance.selectors.usage import usage_timeseries
from governance.selectors.visibility import user_visibility
from tests.governance.test_selectors_usage import END, H0, H1, START, H, write_scenario

pytestmark = pytest.mark.django_db


@pytest.fixture
def scenario(personas):
    """The hand-worked two hours, written to the ledger and rolled up."""
    return write_scenario(personas)


def test_timeseries_per_hour_for_a_program(scenario):
    points = usage_timeseries(
        visibility=user_visibility(user=scenario.program_manager),
        cluster=scenario.cluster,
        start=START,
        end=END,
        node=scenario.program_a,
    )
    assert [p.start for p in points] == [H0, H1]
    assert [p.entitled_gpu_seconds for p in points] == [16 * H, 16 * H]
    assert [p.owed_gpu_seconds for p in points] == [8 * H, 16 * H]
    assert [p.delivered_gpu_seconds for p in points] == [6 * H, 15 * H]
    assert [p.free_gpu_seconds for p in points] == [3 * H, 0]


def test_timeseries_per_day_zero_fills_and_sums(scenario):
    points = usage_timeseries(
        visibility=user_visibility(user=scenario.finance),
        cluster=scenario.cluster,
        start=datetime(2026, 10, 4, tzinfo=UTC),
        end=datetime(2026, 10, 6, tzinfo=UTC),
        bucket="day",
    )
    assert [p.start.day for p in points] == [4, 5]
    assert points[0].delivered_gpu_seconds == 0
    assert points[1].delivered_gpu_seconds == 38 * H
    assert points[1].owed_gpu_seconds == 37 * H


def test_timeseries_of_a_node_outside_the_users_subtree_is_refused(scenario):
    with pytest.raises(PermissionDenied):
        usage_timeseries(
            visibility=user_visibility(user=scenario.program_manager),
            cluster=scenario.cluster,
            start=START,
            end=END,
            node=scenario.program_b,
        )
