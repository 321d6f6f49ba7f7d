"""The default minimum-runtime rule and resumability."""

import pytest

from scheduler.simulator.contract import ContractRule
from scheduler.simulator.traces import TraceJob


def job(gpus, duration, min_runtime=None, resumable=None):
    return TraceJob("j", 0.0, duration, gpus, "p", min_runtime, resumable)


@pytest.mark.parametrize(
    ("gpus", "duration", "expected"),
    [
        (1, 60, 900),  # debug: small and short
        (2, 3600, 900),  # both limits are inclusive
        (3, 60, 7200),  # too many GPUs for debug
        (1, 3601, 7200),  # too long for debug
        (64, 86400, 7200),
    ],
)
def test_default_rule_gives_debug_15_minutes_and_others_2_hours(gpus, duration, expected):
    assert ContractRule().min_runtime(job(gpus, duration)) == expected


def test_a_stated_minimum_wins_and_every_minimum_is_capped():
    rule = ContractRule(max_min_runtime=3 * 3600)
    assert rule.min_runtime(job(1, 60, min_runtime=0)) == 0  # free lane stays free
    assert rule.min_runtime(job(1, 60, min_runtime=600)) == 600
    assert rule.min_runtime(job(8, 86400, min_runtime=86400)) == 3 * 3600
    assert (
        ContractRule(other_min_runtime=5 * 3600, max_min_runtime=3600).min_runtime(job(8, 86400))
        == 3600
    )


def test_thresholds_are_configurable():
    rule = ContractRule(debug_max_gpus=4, debug_max_duration=1800, debug_min_runtime=300)
    assert rule.min_runtime(job(4, 1800)) == 300
    assert rule.min_runtime(job(4, 1801)) == 7200


def test_debug_classification_ignores_a_stated_minimum():
    assert ContractRule().is_debug(job(1, 60, min_runtime=7200))


def test_resumable_defaults_to_true_unless_the_trace_says():
    rule = ContractRule()
    assert rule.resumable(job(1, 60)) is True
    assert rule.resumable(job(1, 60, resumable=False)) is False
    assert ContractRule(default_resumable=False).resumable(job(1, 60)) is False
