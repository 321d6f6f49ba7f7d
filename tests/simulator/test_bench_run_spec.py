"""The bench tools read ``policy:gpus[:first N jobs]`` one way (``trace_source.run_spec``)."""

import pytest

from tests.bench.trace_source import RunSpec, run_spec


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("fairshare:256", RunSpec("fairshare", 256, None)),
        ("quota:512:20000", RunSpec("quota", 512, 20000)),
    ],
)
def test_a_run_spec_is_read(arg, expected):
    assert run_spec(arg) == expected


@pytest.mark.parametrize(
    "arg", ["fairshare", "fairshare:", ":256", "fairshare:x", "fairshare:256:-1", "a:1:2:3", ""]
)
def test_anything_else_stops_the_tool_naming_the_argument(arg):
    with pytest.raises(SystemExit) as stopped:
        run_spec(arg)
    assert repr(arg) in str(stopped.value)
    assert "policy:gpus[:first N jobs]" in str(stopped.value)
