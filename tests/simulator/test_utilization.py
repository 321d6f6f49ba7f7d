"""The optional ``utilization`` column and idle allocations (``docs/simulation.md``,
"Utilization and idle allocations"): parsing, the replay's idle rule, idle runs as the first
victims, and the figures in ``metrics.json`` and the comparison table."""

import pytest

from scheduler.simulator import ReplayConfig, read_trace, replay
from scheduler.simulator.metrics import compute_metrics
from scheduler.simulator.replay import IDLE_AFTER, IDLE_UTILIZATION
from scheduler.simulator.report import comparison_rows
from scheduler.simulator.traces import TraceError
from tests.simulator.scenarios import T0, two_teams

HEADER = "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable,utilization\n"
HOUR = 3600.0


def trace(*rows: str):
    """A canonical trace with a ``utilization`` column from
    ``id,submit,duration,gpus,project,min_runtime,resumable,utilization`` rows whose submit
    time is seconds after T0."""
    lines = []
    for row in rows:
        jid, submit, rest = row.split(",", 2)
        lines.append(f"{jid},{T0 + float(submit)},{rest}\n")
    return read_trace(HEADER + "".join(lines))


# ---------------------------------------------------------------- parsing


def test_the_rule_is_the_products_five_percent_for_thirty_minutes():
    assert IDLE_UTILIZATION == 0.05
    assert IDLE_AFTER == 30 * 60


def test_utilization_is_a_fraction_or_empty():
    t = read_trace(HEADER + "a,0,60,1,p,,,0.5\nb,0,60,1,p,,,\nc,0,60,1,p,,,0\nd,0,60,1,p,,, 1 \n")
    assert [j.utilization for j in t.jobs] == [0.5, None, 0.0, 1.0]


def test_without_the_column_utilization_is_unknown():
    t = read_trace("id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\na,0,60,1,p,,\n")
    assert t.jobs[0].utilization is None


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("busy", "utilization is not a number: 'busy'"),
        ("1.5", "utilization must be a fraction from 0 to 1 (or empty), found '1.5'"),
        ("-0.1", "utilization must be a fraction from 0 to 1 (or empty), found '-0.1'"),
        ("nan", "utilization is not a finite number: 'nan'"),
    ],
)
def test_a_bad_utilization_names_the_line_and_the_field(value, words):
    with pytest.raises(TraceError) as caught:
        read_trace(HEADER + "a,0,60,1,p,,,0.5\n" + f"b,0,60,1,p,,,{value}\n")
    assert caught.value.line == 3
    assert str(caught.value) == f"trace, line 3: {words}"


# ---------------------------------------------------------------- the idle rule, by hand

# 16 GPUs, nothing ever waits (4 + 4 + 2 + 2 + 2 = 14 GPUs), so every run is undisturbed:
# - lazy: 4 GPUs for 4 h at 1 %, protected 2 h: idle from the later of 2 h (its minimum)
#   and 30 min (the rule's wait), so 2 h to 4 h: 2 h x 4 GPUs = 8 GPU-hours;
# - short-lazy: 2 GPUs for 1 h at 0 %, protected 10 min: idle from 30 min to 1 h: 1 GPU-hour;
# - busy (90 %): never idle; unknown (empty): never idle, and not counted as having one;
# - free-lazy: the free lane at 0 %: idle, but never charged, so it counts nothing.
HAND = (
    "lazy,0,14400,4,A,,,0.01",
    "short-lazy,0,3600,2,A,600,,0",
    "busy,0,14400,4,B,,,0.9",
    "unknown,0,14400,2,B,,,",
    "free-lazy,0,3600,2,B,0,,0",
)


def test_idle_gpu_hours_follow_the_rule_on_a_hand_worked_trace():
    result = replay(trace(*HAND), two_teams(), ReplayConfig(gpus=16))
    by_id = {j.id: j for j in result.jobs}
    assert by_id["lazy"].idle_spans == [(T0 + 2 * HOUR, T0 + 4 * HOUR, 4)]
    assert by_id["short-lazy"].idle_spans == [(T0 + 1800, T0 + HOUR, 2)]
    for jid in ("busy", "unknown", "free-lazy"):
        assert by_id[jid].idle_spans == []
    assert result.preemptions == []

    m = compute_metrics(result)
    assert m["jobs_with_utilization"] == 4
    assert m["idle_gpu_hours"] == 9.0
    teams = {t["project"]: t for t in m["teams"]}
    assert teams["A"]["idle_gpu_hours"] == 9.0
    assert teams["B"]["idle_gpu_hours"] == 0.0
    # The submit window ends with the hour of the last submission (T0 + 1 h): only
    # short-lazy's idle half hour lies inside it.
    assert m["submit_window"]["idle_gpu_hours"] == 1.0
    assert {t["project"]: t["idle_gpu_hours"] for t in m["submit_window"]["teams"]} == {
        "A": 1.0,
        "B": 0.0,
    }


def test_a_run_that_ends_before_the_rule_applies_is_never_idle():
    # 20 minutes at 0 %: it ends before it has run 30 minutes.
    result = replay(trace("quick,0,1200,1,A,600,,0"), two_teams(), ReplayConfig(gpus=8))
    assert result.jobs[0].idle_spans == []
    assert compute_metrics(result)["idle_gpu_hours"] == 0.0


# ---------------------------------------------------------------- idle runs go first

# One 8-GPU node, A and B 50 % each. B runs two 4-GPU runs from the start, both resumable and
# started together, so they lose the same work (the id breaks the tie: b-busy goes first).
# At 3 h (both past their 2 h minimum) A asks for 4 GPUs: it reclaims one of B's runs.


def _contest(lazy_utilization: str):
    t = trace(
        "b-busy,0,36000,4,B,,,0.9",
        f"b-lazy,0,36000,4,B,,,{lazy_utilization}",
        "a-train,10800,3600,4,A,,,",
    )
    return replay(t, two_teams(), ReplayConfig(gpus=8))


def test_without_idle_runs_the_tie_goes_by_id():
    result = _contest("0.5")
    first = result.preemptions[0]
    assert (result.jobs[first.job].id, first.by) == ("b-busy", "a-train")


def test_an_idle_run_is_preempted_before_a_busy_one():
    result = _contest("0.01")
    first = result.preemptions[0]
    assert (result.jobs[first.job].id, first.by) == ("b-lazy", "a-train")
    lazy = next(j for j in result.jobs if j.id == "b-lazy")
    # Idle from 2 h (its minimum) until it was preempted.
    idle_from, idle_to, gpus = lazy.idle_spans[0]
    assert (idle_from, idle_to, gpus) == (T0 + 2 * HOUR, first.time, 4)


# ---------------------------------------------------------------- metrics and the table


def test_metrics_keys_are_present_with_or_without_utilization():
    plain = read_trace(
        "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"
        f"a,{T0},3600,1,A,,\nb,{T0},3600,1,B,,\n"
    )
    for t, known in ((plain, 0), (trace(*HAND), 4)):
        m = compute_metrics(replay(t, two_teams(), ReplayConfig(gpus=16)))
        assert m["jobs_with_utilization"] == known
        for period in (m, m["submit_window"]):
            assert "idle_gpu_hours" in period
            assert all("idle_gpu_hours" in team for team in period["teams"])


def test_the_table_shows_idle_gpu_hours_only_when_a_job_had_a_utilization():
    plain = read_trace(
        f"id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\na,{T0},3600,1,A,,\n"
    )
    without = comparison_rows([compute_metrics(replay(plain, two_teams(), ReplayConfig(gpus=8)))])
    assert "idle GPU-hours" not in [label for label, _ in without]

    with_it = comparison_rows(
        [compute_metrics(replay(trace(*HAND), two_teams(), ReplayConfig(gpus=16)))]
    )
    rows = [(label, cells) for label, cells in with_it if label == "idle GPU-hours"]
    assert rows == [("idle GPU-hours", ["1"]), ("idle GPU-hours", ["9"])]  # window, whole
