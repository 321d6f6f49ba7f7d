"""The percent and GPU formats the pages share (``governance.templatetags.govfmt``)."""

from __future__ import annotations

import pytest

from governance.templatetags.govfmt import pct, ratio_pct


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (42.1, "42.10 %"),
        (0, "0.00 %"),
        (0.004, "< 0.01 %"),
        (0.005, "< 0.01 %"),  # rounds half to even: "0.00 %" would read as none
        (0.0051, "0.01 %"),
        (99.994, "99.99 %"),
        (99.995, "> 99.99 %"),
        (99.99999, "> 99.99 %"),
        (100, "100.00 %"),
        (104.5, "104.50 %"),
        (None, "—"),
        ("not a number", "—"),
        (float("inf"), "—"),
        (float("nan"), "—"),
    ],
)
def test_a_percent_never_rounds_to_none_or_to_all(value, shown):
    assert pct(value) == shown


def test_a_ratio_just_short_of_one_is_not_shown_as_all():
    # A cluster healthy for all but a few GPU-minutes of a month
    assert ratio_pct(1 - 8 / 60 / (256 * 24 * 30)) == "> 99.99 %"
    assert ratio_pct(1) == "100.00 %"
