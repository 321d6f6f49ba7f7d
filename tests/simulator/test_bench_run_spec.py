"""The bench tools read ``policy:gpus[:first N jobs]`` one way (``trace_source.run_spec``), and
``variant:gpus[:first N jobs]`` through it (``each_variant_run``)."""

import pytest

from tests.bench.trace_source import RunSpec, each_variant_run, run_spec


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


def test_a_variant_run_replays_fairshare_on_the_reference_path():
    ((arg, variant, trace, _, config),) = each_variant_run(["kept:64:50"], ("fresh", "kept"))
    assert (arg, variant, len(trace.jobs)) == ("kept:64:50", "kept", 50)
    assert (config.policy, config.gpus, config.incremental) == ("fairshare", 64, False)


def test_an_unknown_variant_stops_the_tool_naming_it():
    with pytest.raises(SystemExit) as stopped:
        list(each_variant_run(["kept:64"], ("fresh",)))
    assert "'kept:64'" in str(stopped.value) and "fresh" in str(stopped.value)
