"""Strict duration parsing for the command's flags."""

import pytest

from scheduler.simulator.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7d", 604800), ("8h", 28800), ("30m", 1800), ("90s", 90), ("1.5h", 5400), (" 2H ", 7200)],
)
def test_parses_number_and_unit(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7", "", "-5m", "1h30m", "7 days", "h", "1e3s", "abc", "5w"])
def test_refuses_anything_else_with_the_input_quoted(text):
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_formats_compactly():
    assert [format_duration(s) for s in (42, 720, 12600, 3 * 86400)] == [
        "42s",
        "12m",
        "3.5h",
        "3.0d",
    ]
