"""Trace loading: both formats, times, gzip, sorting, duplicates, and every bad row."""

import gzip

import pytest

from scheduler.simulator.traces import TraceError, load_trace, read_trace
from scheduler.traces import PHILLY_JOBS

HEADER = "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"
T0 = 1483228800.0  # 2017-01-01T00:00:00Z


def test_canonical_rows_are_read_with_iso_and_epoch_times():
    trace = read_trace(
        HEADER
        + "j1,2017-01-01T01:00:00Z,60,1,vision,,\n"
        + "j2,1483228800,7200.5,16,speech,900,false\n"
        + "j3,2017-01-01 00:30:00+01:00,0,2,vision,0,TRUE\n"
    )
    assert [j.id for j in trace.jobs] == ["j3", "j2", "j1"]  # sorted by submit time
    j3, j2, j1 = trace.jobs
    assert j3.submit_time == T0 - 1800  # the offset is honoured
    assert j2.submit_time == T0
    assert j1.submit_time == T0 + 3600  # naive or Z: UTC
    assert (j2.duration, j2.gpus, j2.project, j2.min_runtime, j2.resumable) == (
        7200.5,
        16,
        "speech",
        900.0,
        False,
    )
    assert j1.min_runtime is None and j1.resumable is None  # empty: the replay's defaults
    assert j3.min_runtime == 0.0 and j3.resumable is True
    assert j2.line == 3 and trace.projects == ["speech", "vision"]


def test_equal_submit_times_keep_file_order():
    trace = read_trace(HEADER + "".join(f"j{i},{T0},60,1,p,,\n" for i in range(5, 0, -1)))
    assert [j.id for j in trace.jobs] == ["j5", "j4", "j3", "j2", "j1"]


def test_duplicate_rows_are_kept_and_counted():
    trace = read_trace(HEADER + "a,0,60,1,p,,\nb,0,60,1,p,,\na,0,60,1,p,,\n")
    assert len(trace.jobs) == 3
    assert trace.duplicates == 2
    assert [j.id for j in trace.jobs] == ["a", "b", "a@4"]  # a repeated id is made unique


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("j,2017-13-01T00:00:00,60,1,p,,", "submit_time is neither ISO 8601 nor epoch"),
        ("j,,60,1,p,,", "submit_time is empty"),
        ("j,0,-5,1,p,,", "duration_s is negative"),
        ("j,0,abc,1,p,,", "duration_s is not a number"),
        ("j,0,nan,1,p,,", "duration_s is not a finite number"),
        ("j,0,60,0,p,,", "gpus must be a whole number of GPUs"),
        ("j,0,60,1.5,p,,", "gpus must be a whole number of GPUs"),
        ("j,0,60,1,,,", "project is empty"),
        ("j,0,60,1,p,-1,", "min_runtime_s is negative"),
        ("j,0,60,1,p,,maybe", "resumable must be true or false"),
        ("j,0,60,1,p", "expected 7 fields, found 5"),
        (",0,60,1,p,,", "id is empty"),
        ("j,-3,60,1,p,,", "not a valid epoch time"),
    ],
)
def test_a_bad_canonical_row_is_refused_with_its_line_number(row, reason):
    text = HEADER + "ok,0,60,1,p,,\n" + row + "\n"
    with pytest.raises(TraceError, match=reason) as caught:
        read_trace(text, source="t.csv")
    assert caught.value.line == 3
    assert str(caught.value).startswith("t.csv, line 3: ")


def test_a_wrong_header_is_refused_on_line_1():
    with pytest.raises(TraceError, match=r"header lacks column.*duration_s") as caught:
        read_trace("id,submit_time,gpus,project,min_runtime_s,resumable\n")
    assert caught.value.line == 1


def test_an_empty_file_is_refused():
    with pytest.raises(TraceError, match="empty file"):
        read_trace("")


def test_unknown_format_is_refused():
    with pytest.raises(TraceError, match="unknown trace format 'slurm'"):
        read_trace(HEADER, fmt="slurm")


def test_philly_rows_use_the_cluster_as_project_and_the_line_as_id():
    trace = read_trace(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
        "2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n",
        fmt="philly",
    )
    assert [(j.id, j.project, j.gpus, j.duration) for j in trace.jobs] == [
        ("L3", "6214e9", 8, 2951.0),
        ("L2", "11cb48", 1, 66.0),
    ]


def test_a_bad_philly_row_names_its_line():
    with pytest.raises(TraceError, match=r"line 3: duration is negative \(-1\)"):
        read_trace(
            "timestamp,duration,num_gpus,gpu_time,cluster\n"
            "2017-10-09 07:01:55,66.0,1,66.0,a\n"
            "2017-10-09 07:01:55,-1,1,66.0,a\n",
            fmt="philly",
        )


def test_an_optional_submitter_column_names_who_submitted_each_job():
    trace = read_trace(
        "submitter," + HEADER
        + " sam ,j1,2017-01-01T00:00:00Z,60,1,vision,900,\n"
        + ",j2,2017-01-01T00:01:00Z,60,1,vision,900,\n"
    )  # fmt: skip
    assert [j.submitter for j in trace.jobs] == ["sam", ""]
    assert [j.submitter for j in read_trace(HEADER + "j1,0,60,1,vision,,\n").jobs] == [""]


def test_a_submitter_name_too_long_is_a_trace_error_naming_the_line():
    with pytest.raises(TraceError, match=r"line 2.*submitter"):
        read_trace("submitter," + HEADER + "x" * 151 + ",j1,0,60,1,vision,,\n")


def test_a_sweep_of_one_submitter_is_ranked_in_its_burst_by_the_replay():
    from scheduler.simulator import ReplayConfig, replay

    rows = "".join(f"s{i},{T0 + i},600,1,vision,900,,sam\n" for i in range(3))
    rows += f"k1,{T0 + 5},600,1,vision,900,,kim\n"
    trace = read_trace(HEADER.rstrip("\n") + ",submitter\n" + rows)
    # One GPU: the sweep's first job, then kim's lone job, then the rest of the sweep.
    result = replay(trace, None, ReplayConfig(gpus=1, gpus_per_node=1, policy="fairshare"))
    starts = sorted(result.jobs, key=lambda j: j.first_start)
    assert [j.id for j in starts] == ["s0", "k1", "s1", "s2"]


def test_gzipped_files_are_read_transparently(tmp_path):
    text = HEADER + "j1,0,60,1,p,,\n"
    plain = tmp_path / "t.csv"
    plain.write_text(text)
    packed = tmp_path / "t.data"  # detected by content, not by name
    packed.write_bytes(gzip.compress(text.encode()))
    assert load_trace(packed).jobs == load_trace(plain).jobs


def test_a_missing_file_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "nope.csv")


def test_the_bundled_philly_trace_loads_whole():
    trace = load_trace(PHILLY_JOBS, "philly")
    assert len(trace.jobs) == 82247
    assert trace.duplicates == 65  # as the trace's README says; kept on purpose
    assert len(trace.projects) == 15
    times = [j.submit_time for j in trace.jobs]
    assert times == sorted(times)
