"""Metrics on small traces worked out by hand.

Scenario (8 GPUs on one node, teams A and B at 50 % each, so 4 GPUs entitled each; fifo):
``a1`` (A, 8 GPUs, 2 h) and ``b1`` (B, 2 GPUs, 1 h, a debug job) are submitted at 00:00.
``a1`` takes the whole node; ``b1`` waits until ``a1`` ends at 02:00 and runs until 03:00.

| hour | A demand | A owed | A charged | A burst | B demand | B owed | B charged |
|------|---------:|-------:|----------:|--------:|---------:|-------:|----------:|
| 0    | 8        | 4      | 8         | 4       | 2        | 2      | 0         |
| 1    | 8        | 4      | 8         | 4       | 2        | 2      | 0         |
| 2    | 0        | 0      | 0         | 0       | 2        | 2      | 2         |

A: owed 8, charged 16, delivery 1. B: owed 6, charged 2, delivery 1/3.
Org: (8 + 2) / (8 + 6) = 5/7; hourly (4 + 4 + 0 + 0 + 2) / 14 = 5/7 too.
Occupancy (16 + 2) / (8 x 3) = 0.75. Unbudgeted: A's burst 8 of 18 used = 4/9.
Waits: a1 0 s, b1 7200 s: p50 3600, p90 6480, mean 3600; debug = b1, other = a1.
Submit window = hour 0 only: A 4/4, B 0/2, org 4/6; b1 counts as waiting 3600 s so far.
"""

import pytest

from scheduler.simulator import ReplayConfig, compute_metrics, replay
from scheduler.simulator.metrics import oversubscribed_spans, percentile
from tests.simulator.scenarios import T0, trace, two_teams

REQUIRED_KEYS = {
    "policy",
    "jobs",
    "gpus",
    "wall_seconds",
    "simulated_seconds",
    "occupancy",
    "delivery_ratio",
    "hourly_delivery_ratio",
    "unbudgeted_fraction",
    "preemptions",
    "lost_gpu_hours",
    "queue_wait_seconds",
    "teams",
}
TEAM_KEYS = {
    "project",
    "share",
    "owed_gpu_hours",
    "charged_gpu_hours",
    "burst_gpu_hours",
    "free_gpu_hours",
    "delivery_ratio",
    "hourly_delivery_ratio",
    "jobs",
    "queue_wait_p90_seconds",
}


@pytest.fixture(scope="module")
def metrics():
    t = trace("a1,0,7200,8,A,,", "b1,0,3600,2,B,,")
    return compute_metrics(replay(t, two_teams(), ReplayConfig(gpus=8, policy="fifo")))


def team(m, name):
    return next(t for t in m["teams"] if t["project"] == name)


def test_metrics_have_every_required_key(metrics):
    assert set(metrics) >= REQUIRED_KEYS
    assert REQUIRED_KEYS - {"policy", "jobs", "gpus", "wall_seconds", "simulated_seconds"} <= set(
        metrics["submit_window"]
    )
    for t in metrics["teams"]:
        assert set(t) >= TEAM_KEYS
    for group in ("all", "debug", "other", "requeue", "every", "gang", "whole_node"):
        assert {"p50", "p90", "mean"} <= set(metrics["queue_wait_seconds"][group])


def test_hand_worked_team_figures(metrics):
    a, b = team(metrics, "A"), team(metrics, "B")
    assert (a["share"], a["owed_gpu_hours"], a["charged_gpu_hours"], a["burst_gpu_hours"]) == (
        50.0,
        8.0,
        16.0,
        8.0,
    )
    assert (a["delivery_ratio"], a["hourly_delivery_ratio"]) == (1.0, 1.0)
    assert (b["owed_gpu_hours"], b["charged_gpu_hours"], b["burst_gpu_hours"]) == (6.0, 2.0, 0.0)
    assert b["delivery_ratio"] == pytest.approx(1 / 3, abs=1e-4)
    assert b["hourly_delivery_ratio"] == pytest.approx(1 / 3, abs=1e-4)
    assert (a["jobs"], b["jobs"]) == (1, 1)
    assert b["queue_wait_p90_seconds"] == 7200


def test_hand_worked_org_figures(metrics):
    assert metrics["jobs"] == 2 and metrics["gpus"] == 8
    assert metrics["simulated_seconds"] == 3 * 3600
    assert metrics["delivery_ratio"] == pytest.approx(5 / 7, abs=1e-4)
    assert metrics["hourly_delivery_ratio"] == pytest.approx(5 / 7, abs=1e-4)
    assert metrics["occupancy"] == 0.75
    assert metrics["unbudgeted_fraction"] == pytest.approx(4 / 9, abs=1e-4)
    assert (metrics["worst_team"], metrics["worst_team_delivery_ratio"]) == ("B", 0.3333)
    assert (metrics["preemptions"], metrics["lost_gpu_hours"]) == (0, 0.0)
    waits = metrics["queue_wait_seconds"]
    assert (waits["all"]["p50"], waits["all"]["p90"], waits["all"]["mean"]) == (3600, 6480, 3600)
    assert waits["debug"]["p90"] == 7200 and waits["other"]["p90"] == 0


def test_hand_worked_submit_window(metrics):
    window = metrics["submit_window"]
    assert window["end_time"] == T0 + 3600
    assert (team(window, "A")["owed_gpu_hours"], team(window, "A")["charged_gpu_hours"]) == (4, 8)
    assert (team(window, "B")["owed_gpu_hours"], team(window, "B")["charged_gpu_hours"]) == (2, 0)
    assert window["delivery_ratio"] == pytest.approx(4 / 6, abs=1e-4)
    assert window["occupancy"] == 1.0
    assert window["queue_wait_seconds"]["debug"]["p50"] == 3600  # still waiting: so far


def test_hourly_delivery_is_stricter_than_delivery_when_a_team_catches_up():
    # B owed 4 GPUs in hour 0 but got them only in hour 2 (after A's 2 h job, 8 GPUs):
    # delivered over the replay (catch-up counts) but not hour by hour.
    t = trace("a1,0,7200,8,A,,", "b1,0,3600,4,B,,", "b2,3600,3600,4,B,,")
    m = compute_metrics(replay(t, two_teams(), ReplayConfig(gpus=8, policy="fifo")))
    b = team(m, "B")
    # B: demand 4 in hours 0-2 (b1 waits, b2 arrives), owed 4+4+4 = 12; both run in hour 2
    # with 8 GPUs: charged 8, burst 4.
    assert (b["owed_gpu_hours"], b["charged_gpu_hours"], b["burst_gpu_hours"]) == (12, 8, 4)
    assert b["delivery_ratio"] == pytest.approx(8 / 12, abs=1e-4)
    assert b["hourly_delivery_ratio"] == pytest.approx(4 / 12, abs=1e-4)


def test_gangs_and_whole_node_work_have_their_own_first_waits():
    # Two nodes of 8 GPUs, fifo. At 00:00 B's b1 takes a whole node for 1 h and A's 2-GPU
    # a1 runs 2 h on the other. A's gang g1 (16 GPUs: both nodes, submitted at 00:00:01)
    # starts when a1 ends, at 02:00, and runs until 03:00. B's whole-node b2, submitted at
    # 02:30, starts then.
    t = trace(
        "b1,0,3600,8,B,,", "a1,0,7200,2,A,,", "g1,1,3600,16,A,,", "b2,9000,3600,8,B,,"
    )  # fmt: skip
    m = compute_metrics(replay(t, two_teams(), ReplayConfig(gpus=16, policy="fifo")))
    waits = m["queue_wait_seconds"]
    assert (waits["gang"]["count"], waits["gang"]["p50"]) == (1, 7200 - 1)
    # b1 waited 0 s and b2 30 min; a1 (2 GPUs) is neither.
    assert (waits["whole_node"]["count"], waits["whole_node"]["mean"]) == (2, 900)
    assert waits["whole_node"]["p90"] == pytest.approx(0.9 * 1800)
    assert waits["all"]["count"] == 4  # both classes are also among every first wait


def test_unbudgeted_projects_are_listed_but_not_judged():
    t = trace("a1,0,3600,4,A,,", "x1,0,3600,4,X,,")
    m = compute_metrics(replay(t, two_teams(), ReplayConfig(gpus=8, policy="fifo")))
    x = team(m, "X")
    assert (x["share"], x["owed_gpu_hours"], x["delivery_ratio"]) == (0.0, 0.0, None)
    assert x["burst_gpu_hours"] == 4.0  # all of an unbudgeted team's use is unbudgeted
    assert m["unbudgeted_fraction"] == 0.5
    assert m["teams_judged"] == 1  # A only; B owed nothing (no demand)


def test_percentile_interpolates_between_ranks():
    assert percentile([], 50) is None
    assert percentile([5], 90) == 5
    assert percentile([0, 10], 90) == 9
    assert percentile([3, 1, 2, 4], 50) == 2.5


def test_occupancy_when_oversubscribed_counts_only_hours_with_enough_demand(metrics):
    # Hours 0 and 1: demand 8 + 2 >= 8 GPUs, all 8 busy; hour 2: demand 2 only.
    assert metrics["oversubscribed_hours"] == 2
    assert metrics["occupancy_when_oversubscribed"] == 1.0


def test_oversubscribed_spans_join_consecutive_hours_into_one_stretch():
    # The scenario's hours 0 and 1 are over-demanded (10 GPUs asked of 8), hour 2 is not;
    # a second, later burst (hour 4: 16 GPUs asked) is a stretch of its own.
    t = trace("a1,0,7200,8,A,,", "b1,0,3600,2,B,,", "a2,14400,3600,8,A,,", "b2,14400,3600,8,B,,")
    result = replay(t, two_teams(), ReplayConfig(gpus=8, policy="fifo"))
    assert oversubscribed_spans(result, T0 + 2 * 3600) == [(T0, T0 + 2 * 3600)]
    assert oversubscribed_spans(result, result.last_submit + 3600) == [
        (T0, T0 + 2 * 3600),
        (T0 + 4 * 3600, T0 + 5 * 3600),
    ]
