"""``manage.py simulate``: outputs, and clear refusals (CommandError, exit 1, no traceback)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from scheduler.engine import POLICIES
from tests.simulator.scenarios import HEADER, T0

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_trace(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(
        HEADER
        + f"a1,{T0},7200,8,A,,\n"
        + f"b1,{T0},3600,2,B,,\n"
        + f"big,{T0},60,64,B,,\n"
        + f"c1,{T0 + 600},1800,4,C,,\n"
    )
    return path


@pytest.fixture
def budgets(tmp_path):
    path = tmp_path / "budgets.json"
    path.write_text(
        json.dumps(
            {
                "name": "org",
                "share": 100,
                "children": [{"name": "A", "share": 50}, {"name": "B", "share": 50}],
            }
        )
    )
    return path


def run(*args):
    from io import StringIO

    out = StringIO()
    call_command("simulate", *args, stdout=out)
    return out.getvalue()


def test_compare_writes_metrics_per_policy_and_prints_a_table(small_trace, budgets, tmp_path):
    out_dir = tmp_path / "out"
    text = run(
        "--trace", str(small_trace), "--gpus", "16", "--compare", ",".join(POLICIES),
        "--budgets", str(budgets), "--out", str(out_dir),
    )  # fmt: skip
    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert [m["policy"] for m in metrics] == list(POLICIES)
    assert all(m["jobs"] == 3 and m["skipped_jobs"] == 1 for m in metrics)
    assert "1 job(s) ask for more than 16 GPUs and were skipped" in text
    assert "unbudgeted projects: C" in text
    header = next(line for line in text.splitlines() if line.startswith("policy"))
    assert header.split()[1:] == list(POLICIES)
    assert "delivery ratio (org)" in text and "— submit window —" in text
    assert (out_dir / "timeline.html").exists() and (out_dir / "plotly.min.js").exists()


def test_one_policy_and_options(small_trace, tmp_path):
    out_dir = tmp_path / "out"
    run(
        "--trace", str(small_trace), "--gpus", "16", "--gpus-per-node", "4",
        "--policy", "quota", "--window", "1d", "--max-min-runtime", "1h",
        "--no-timeline", "--out", str(out_dir),
    )  # fmt: skip
    [m] = json.loads((out_dir / "metrics.json").read_text())
    assert (m["policy"], m["gpus"], m["gpus_per_node"]) == ("quota", 16, 4)
    assert not (out_dir / "timeline.html").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "lottery"], "unknown policy 'lottery'; known policies: fairshare"),
        (["--compare", "fifo,nope"], "unknown policy 'nope'"),
        (["--format", "slurm"], "unknown trace format 'slurm'"),
        (["--window", "7"], "--window: '7' is not a duration"),
        (["--max-min-runtime=-1h"], "--max-min-runtime: '-1h' is not a duration"),
        (["--window", "0s"], "window_seconds must be positive"),
        (["--gpus-per-node", "3"], "16 GPUs is not a whole number of 3-GPU nodes"),
        (["--budgets", "missing.json"], "missing.json: cannot read"),
    ],
)
def test_bad_arguments_are_refused_clearly(small_trace, tmp_path, args, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        run("--trace", str(small_trace), "--gpus", "16", "--out", str(tmp_path / "o"), *args)
    assert not (tmp_path / "o").exists()  # a refusal writes nothing


def test_a_bad_trace_line_is_refused_with_its_number(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + f"a1,{T0},60,1,A,,\na2,{T0},-60,1,A,,\n")
    with pytest.raises(CommandError, match=r"bad.csv, line 3: duration_s is negative"):
        run("--trace", str(path), "--gpus", "8")


def test_shares_out_of_range_are_refused(small_trace, tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"name": "org", "children": [{"name": "A", "share": 120}]}))
    with pytest.raises(CommandError, match="node 'A': share 120 is outside 0-100"):
        run("--trace", str(small_trace), "--gpus", "8", "--budgets", str(path))


def test_from_the_shell_a_refusal_exits_non_zero_without_a_traceback(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "a1,yesterday,60,1,A,,\n")
    proc = subprocess.run(
        [sys.executable, "manage.py", "simulate", "--trace", str(path), "--gpus", "8"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"DEBUG": "true", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 1
    assert "line 2: submit_time is neither ISO 8601 nor epoch seconds" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_slice_of_the_bundled_philly_trace_replays_with_the_philly_budgets(tmp_path):
    from scheduler.traces import PHILLY_BUDGETS, PHILLY_JOBS

    text = run(
        "--trace", str(PHILLY_JOBS), "--format", "philly", "--gpus", "64", "--limit", "100",
        "--compare", "fifo,fairshare", "--budgets", str(PHILLY_BUDGETS),
        "--no-timeline", "--out", str(tmp_path),
    )  # fmt: skip
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert [m["jobs"] for m in metrics] == [100, 100]
    assert "(first 100 jobs)" in text
    assert "unbudgeted projects:" not in text or "23dbec" in text


def test_the_reference_replay_gives_every_figure_the_incremental_one_gives(tmp_path):
    """``--reference`` recomputes everything each cycle; only the cost may differ."""
    from scheduler.traces import PHILLY_BUDGETS, PHILLY_JOBS

    figures = {}
    for mode in ("incremental", "reference"):
        out = tmp_path / mode
        run(
            "--trace", str(PHILLY_JOBS), "--format", "philly", "--gpus", "64", "--limit", "3000",
            "--compare", "quota,fairshare", "--budgets", str(PHILLY_BUDGETS), "--no-timeline",
            "--out", str(out), *(["--reference"] if mode == "reference" else []),
        )  # fmt: skip
        cost = ("wall_seconds", "jobs_per_second")
        figures[mode] = [
            {k: v for k, v in m.items() if k not in cost}
            for m in json.loads((out / "metrics.json").read_text())
        ]

    assert figures["reference"] == figures["incremental"]
    assert figures["incremental"][1]["preemptions"] > 0  # the shortcuts had work to do
