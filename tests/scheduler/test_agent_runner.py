"""The local agent's process handling, with real subprocesses (no Django, no server)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from scheduler.agent.runner import (
    LaunchSpecError,
    ProcessRunner,
    command_from_launch_spec,
    parse_gpu_indices,
    reap_orphans,
)
from tests.waiting import wait_until


def wait_exits(runner: ProcessRunner, count: int = 1, timeout: float = 20.0):
    """Poll the runner until ``count`` processes have ended."""
    exits = []

    def enough() -> bool:
        exits.extend(runner.poll())
        return len(exits) >= count

    wait_until(enough, timeout, 0.05)
    return exits


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is not running any more.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def runner(tmp_path):
    r = ProcessRunner(gpus=["0", "1", "2", "3"], node=f"test-{uuid.uuid4().hex[:8]}",
                      log_dir=tmp_path / "logs", grace_seconds=5)  # fmt: skip
    yield r
    r.stop_all(grace_seconds=0)
    r.wait_all(timeout=5)


def test_command_sees_its_gpus_in_cuda_visible_devices(runner, tmp_path):
    out = tmp_path / "cuda.txt"
    runner.start("run-1", {"command": f'echo "$CUDA_VISIBLE_DEVICES" > {out}'}, gpus=2)
    (ended,) = wait_exits(runner)
    assert ended.outcome == "succeeded"
    assert ended.gpus == ["0", "1"]
    assert out.read_text().strip() == "0,1"


def test_concurrent_workloads_get_disjoint_gpus_and_give_them_back(runner):
    runner.start("a", {"command": ["sleep", "30"]}, gpus=3)
    runner.start("b", ["sleep", "30"], gpus=1)
    assert runner.free_gpus() == []
    assert sorted(runner.gpus_in_use()) == ["0", "1", "2", "3"]
    runner.stop("a", grace_seconds=1)
    (ended,) = wait_exits(runner)
    assert ended.key == "a"
    assert runner.free_gpus() == ["0", "1", "2"]


def test_start_is_idempotent_per_key(runner):
    assert runner.start("a", ["sleep", "30"], gpus=1)
    pid = runner.pid("a")
    assert runner.start("a", ["sleep", "30"], gpus=1)
    assert runner.pid("a") == pid
    assert runner.gpus_in_use() == ["0"]


def test_non_zero_exit_is_a_failure_with_its_code(runner):
    runner.start("f", {"command": "exit 3"}, gpus=1)
    (ended,) = wait_exits(runner)
    assert (ended.outcome, ended.returncode) == ("failed", 3)
    assert ended.message == "exit code 3"


def test_launch_spec_args_and_env_reach_the_process(runner, tmp_path):
    out = tmp_path / "args.txt"
    spec = {
        "command": [sys.executable, "-c", "import os,sys; open(sys.argv[1],'w').write(os.environ['X'] + sys.argv[2])"],
        "args": [str(out), "-b"],
        "env": {"X": "a"},
    }  # fmt: skip
    runner.start("p", spec, gpus=1)
    (ended,) = wait_exits(runner)
    assert ended.outcome == "succeeded"
    assert out.read_text() == "a-b"


def test_stop_sends_sigterm_which_a_trapping_script_handles(runner, tmp_path):
    marker = tmp_path / "got-term"
    script = tmp_path / "trap.sh"
    script.write_text(textwrap.dedent(f"""\
        trap 'echo checkpoint > {marker}; exit 0' TERM
        echo ready > {tmp_path / "ready"}
        while true; do sleep 0.1; done
    """))  # fmt: skip
    runner.start("t", ["/bin/sh", str(script)], gpus=1)
    assert _wait_file(tmp_path / "ready")
    runner.stop("t", grace_seconds=10)
    (ended,) = wait_exits(runner)
    assert marker.read_text().strip() == "checkpoint"
    assert ended.stopped and not ended.killed_after_grace
    # Stopped by an order: interrupted work, whatever the exit code.
    assert ended.outcome == "preempted"
    assert ended.ended_at - ended.started_at < 10


def test_a_process_ignoring_sigterm_is_killed_after_the_grace(runner, tmp_path):
    script = tmp_path / "stubborn.py"
    # It notes each SIGTERM it receives and carries on.
    script.write_text(textwrap.dedent(f"""\
        import signal, time, pathlib
        got = pathlib.Path({str(tmp_path / "got-sigterm")!r})
        signal.signal(signal.SIGTERM, lambda *_: got.write_text("SIGTERM"))
        pathlib.Path({str(tmp_path / "ready")!r}).write_text("ready")
        while True:
            time.sleep(0.1)
    """))  # fmt: skip
    runner.start("s", [sys.executable, str(script)], gpus=1)
    assert _wait_file(tmp_path / "ready")
    stop_at = time.monotonic()
    runner.stop("s", grace_seconds=2)
    assert _wait_file(tmp_path / "got-sigterm")
    if time.monotonic() - stop_at < 2:  # read inside the grace: SIGTERM ignored, nothing ended
        assert runner.poll() == []
        assert runner.is_running("s")
    (ended,) = wait_exits(runner)
    assert time.monotonic() - stop_at >= 2
    assert ended.killed_after_grace
    assert ended.returncode == -signal.SIGKILL
    assert ended.outcome == "preempted"
    assert "SIGKILL after the grace period" in ended.message


def test_stop_reaches_everything_the_command_spawned(runner, tmp_path):
    pidfile = tmp_path / "child.pid"
    runner.start("g", {"command": f"sleep 60 & echo $! > {pidfile}; wait"}, gpus=1)
    assert _wait_file(pidfile)
    child = int(pidfile.read_text())
    assert alive(child)
    runner.stop("g", grace_seconds=2)
    wait_exits(runner)
    wait_until(lambda: not alive(child), 5, 0.05)
    assert not alive(child)


def test_second_stop_keeps_the_first_grace(runner, tmp_path):
    runner.start("x", ["sleep", "30"], gpus=1)
    assert runner.stop("x", grace_seconds=5)
    assert runner.stop("x", grace_seconds=0)
    (ended,) = wait_exits(runner)
    assert not ended.killed_after_grace  # sleep dies of SIGTERM; the 0 s grace was not used


def test_stop_of_something_not_running_is_a_no_op(runner):
    assert runner.stop("never-started") is False
    assert runner.poll() == []


def test_not_enough_free_gpus_is_reported_as_a_failed_start(runner):
    assert runner.start("big", ["sleep", "30"], gpus=5) is False
    (ended,) = runner.poll()
    assert ended.outcome == "failed"
    assert "needs 5 GPUs, 4 free" in ended.message


def test_container_images_are_refused_with_a_reason(runner):
    assert runner.start("img", {"image": "pytorch:latest", "args": ["train"]}, gpus=1) is False
    (ended,) = runner.poll()
    assert ended.outcome == "failed"
    assert "container images are not run by the local agent" in ended.message


def test_a_missing_program_is_a_failed_start_not_a_crash(runner):
    assert runner.start("nope", ["/nonexistent/program"], gpus=1) is False
    (ended,) = runner.poll()
    assert ended.outcome == "failed"
    assert "cannot start '/nonexistent/program'" in ended.message


def test_output_goes_to_the_run_log(runner, tmp_path):
    runner.start("log:1", {"command": "echo hello; echo oops >&2"}, gpus=1)
    (ended,) = wait_exits(runner)
    assert Path(ended.log_path).read_text().split() == ["hello", "oops"]


def test_a_machine_without_gpus_still_runs_commands(tmp_path):
    runner = ProcessRunner(gpus=[], node="cpu-only")
    out = tmp_path / "ran"
    runner.start("cpu", {"command": f'echo "[$CUDA_VISIBLE_DEVICES]" > {out}'}, gpus=0)
    (ended,) = wait_exits(runner)
    assert ended.outcome == "succeeded"
    assert out.read_text().strip() == "[]"


def test_orphans_of_an_earlier_agent_life_are_killed(tmp_path):
    node = f"orphan-{uuid.uuid4().hex[:8]}"
    earlier = ProcessRunner(gpus=["0"], node=node, instance="earlier")
    earlier.start("left-behind", ["sleep", "60"], gpus=1)
    pid = earlier.pid("left-behind")
    killed = reap_orphans(node, keep_instance="current")
    assert killed == [pid]
    (ended,) = wait_exits(earlier)
    assert ended.returncode == -signal.SIGKILL
    # The current life's own processes and other nodes' processes are left alone.
    current = ProcessRunner(gpus=["0"], node=node, instance="current")
    current.start("mine", ["sleep", "60"], gpus=1)
    assert reap_orphans(node, keep_instance="current") == []
    assert current.is_running("mine")
    current.stop_all(grace_seconds=0)
    current.wait_all(timeout=5)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0,1,2,3", ["0", "1", "2", "3"]), ("0-3", ["0", "1", "2", "3"]), ("0-1, 6", ["0", "1", "6"]), ("", [])],
)  # fmt: skip
def test_gpu_indices_parse(text, expected):
    assert parse_gpu_indices(text) == expected


@pytest.mark.parametrize("text", ["a", "3-1", "0,0", "1-x"])
def test_bad_gpu_indices_are_refused(text):
    with pytest.raises(ValueError):
        parse_gpu_indices(text)


def test_launch_spec_shapes():
    assert command_from_launch_spec("echo hi")[0] == ["/bin/sh", "-c", "echo hi"]
    assert command_from_launch_spec(["a", "b"])[0] == ["a", "b"]
    assert command_from_launch_spec({"command": "echo $1", "args": ["x"]})[0] == [
        "/bin/sh", "-c", "echo $1", "sh", "x",
    ]  # fmt: skip
    with pytest.raises(LaunchSpecError, match="no command"):
        command_from_launch_spec({})
    with pytest.raises(LaunchSpecError, match="list of strings"):
        command_from_launch_spec({"command": [1, 2]})


def _wait_file(path: Path, timeout: float = 10.0) -> bool:
    return bool(wait_until(lambda: path.exists() and path.read_text().strip(), timeout, 0.05))
