"""``manage.py estimate_error``: its options reach the replay, and bad ones are refused."""

import io

import pytest
from django.core.management import CommandError, call_command

from tests.simulator.scenarios import HEADER, T0

# One 8-GPU node: a1 holds it for 2 h; b1 and b2 wait (b2 behind b1), so each is sampled.
ROWS = ("a1,0,7200,8,A,600,", "b1,60,3600,4,B,600,", "b2,120,3600,8,B,600,")


def _trace(tmp_path) -> str:
    path = tmp_path / "trace.csv"
    lines = [
        f"{jid},{T0 + float(at)},{rest}\n" for jid, at, rest in (r.split(",", 2) for r in ROWS)
    ]
    path.write_text(HEADER + "".join(lines))
    return str(path)


@pytest.mark.parametrize("wake", [False, True])
def test_the_estimates_of_a_trace_whose_assumptions_hold_are_exact(tmp_path, wake):
    out = io.StringIO()
    call_command("estimate_error", trace=_trace(tmp_path), gpus=8, wake_at_timers=wake, stdout=out)
    text = out.getvalue()
    # a1 starts at once; b1 waits for it, b2 for b1. Nothing arrives after b2 and durations
    # are exact: each estimate is the real start.
    assert "2 sampled jobs waited past their first cycle" in text
    assert "|estimated - actual start|: p50 0.00 h, p90 0.00 h" in text


def test_bad_samples_are_refused_naming_the_option(tmp_path):
    with pytest.raises(CommandError, match="--samples"):
        call_command("estimate_error", trace=_trace(tmp_path), gpus=8, samples=0)
