"""Run workloads as local processes with their GPUs, stop them politely, collect their exits.

Each workload part runs in its own session (process group), so a stop reaches the command and
everything it spawned: SIGTERM first, then SIGKILL once the grace period has passed. The
runner never blocks: ``poll()`` reaps finished processes, escalates overdue stops, and returns
what ended since the last call. No Django, no HTTP: the agent loop (``loop.py``) drives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.agent.launch_spec import (
    LaunchCommand,
    LaunchSpecError,
    command_from_launch_spec,
    parse_gpu_indices,
)
from scheduler.agent.orphans import ENV_INSTANCE, ENV_KEY, ENV_NODE, reap_orphans

logger = logging.getLogger(__name__)

# Also importable from here, beside the runner: what the agent needs to run a workload.
__all__ = [
    "ENV_INSTANCE",
    "ENV_KEY",
    "ENV_NODE",
    "LaunchCommand",
    "LaunchSpecError",
    "ProcessExit",
    "ProcessRunner",
    "command_from_launch_spec",
    "parse_gpu_indices",
    "reap_orphans",
]

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: get SIGKILL if the agent dies (Linux), so no orphan keeps
    GPUs that the server has already given to someone else."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class ProcessExit:
    """How one workload process ended."""

    key: str
    returncode: int | None
    stopped: bool
    killed_after_grace: bool
    started_at: float
    ended_at: float
    gpus: list[str]
    log_path: str | None = None
    error: str = ""

    @property
    def outcome(self) -> str:
        """``preempted`` when a stop order ended it, else ``succeeded`` or ``failed``.

        A stopped process that traps SIGTERM and exits 0 is still ``preempted``: its work was
        interrupted, not finished.
        """
        if self.stopped:
            return "preempted"
        return "succeeded" if self.returncode == 0 else "failed"

    @property
    def message(self) -> str:
        """A short plain-words account for the server's run history."""
        if self.error:
            return self.error
        if self.returncode is not None and self.returncode < 0:
            text = f"ended by signal {signal.Signals(-self.returncode).name}"
        else:
            text = f"exit code {self.returncode}"
        if self.killed_after_grace:
            text += " (SIGKILL after the grace period)"
        elif self.stopped:
            text += " (stopped with SIGTERM)"
        return text


@dataclass
class _Process:
    key: str
    popen: subprocess.Popen
    gpus: list[str]
    started_at: float
    log_path: str | None
    log_file: object = None
    stop_requested_at: float | None = None
    grace_seconds: float = 0.0
    killed: bool = False
    extra: dict = field(default_factory=dict)


class ProcessRunner:
    """Start, stop and reap workload processes on this host.

    ``gpus`` are the GPU indices the agent owns; each started process gets the first free ones
    in ``CUDA_VISIBLE_DEVICES`` and gives them back when it ends. Keys are the caller's
    (the agent uses the start order's id), and a key runs at most once at a time.
    """

    def __init__(
        self,
        *,
        gpus: Sequence[str],
        node: str = "local",
        log_dir: Path | str | None = None,
        grace_seconds: float = 30.0,
        instance: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.gpus = list(gpus)
        self.node = node
        self.log_dir = Path(log_dir) if log_dir else None
        self.grace_seconds = grace_seconds
        self.instance = instance or f"{os.getpid()}-{int(time.time())}"
        self.clock = clock
        self._procs: dict[str, _Process] = {}
        self._finished: list[ProcessExit] = []

    # --- queries -------------------------------------------------------------------------
    def is_running(self, key: str) -> bool:
        """Whether ``key`` has a process that has not been reported as ended yet."""
        return key in self._procs

    def running_keys(self) -> list[str]:
        """Keys of the processes still running (or stopping)."""
        return list(self._procs)

    def gpus_in_use(self) -> list[str]:
        """GPU indices held by running processes."""
        return [g for p in self._procs.values() for g in p.gpus]

    def gpus_by_run(self) -> dict[str, list[str]]:
        """The GPU indices each running (or stopping) process holds, by key."""
        return {key: list(p.gpus) for key, p in self._procs.items()}

    def gpus_of(self, key: str) -> int:
        """How many GPUs the process of ``key`` holds (0 when it is not running)."""
        proc = self._procs.get(key)
        return len(proc.gpus) if proc else 0

    def free_gpus(self) -> list[str]:
        """GPU indices not held by any running process, in the agent's order."""
        used = set(self.gpus_in_use())
        return [g for g in self.gpus if g not in used]

    def pid(self, key: str) -> int | None:
        """The process id of ``key`` (tests and logs)."""
        proc = self._procs.get(key)
        return proc.popen.pid if proc else None

    # --- actions -------------------------------------------------------------------------
    def start(
        self,
        key: str,
        launch_spec: Mapping | str | Sequence,
        *,
        gpus: int,
        env: Mapping[str, str] | None = None,
    ) -> bool:
        """Start the command of ``launch_spec`` on ``gpus`` free GPUs; idempotent per key.

        Returns True when a process was started (or already runs under ``key``). When it
        cannot start (bad launch spec, not enough free GPUs, no such program) the failure is
        queued as an exit with ``error`` set, and False is returned.
        """
        if key in self._procs:
            return True
        now = self.clock()
        try:
            argv, spec_env, cwd = command_from_launch_spec(launch_spec)
        except LaunchSpecError as exc:
            self._fail(key, now, [], f"cannot start: {exc}")
            return False
        free = self.free_gpus()
        if gpus > len(free):
            self._fail(
                key, now, [], f"cannot start: needs {gpus} GPUs, {len(free)} free on this agent"
            )
            return False
        chosen = free[:gpus]
        child_env = {
            **os.environ,
            **spec_env,
            **(env or {}),
            "CUDA_VISIBLE_DEVICES": ",".join(chosen),
            ENV_NODE: self.node,
            ENV_KEY: key,
            ENV_INSTANCE: self.instance,
        }
        log_path = None
        log_file = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log_path = str(self.log_dir / f"{_safe(key)}.log")
            log_file = open(log_path, "ab")  # noqa: SIM115 - closed when the process ends
        try:
            popen = subprocess.Popen(
                argv,
                env=child_env,
                cwd=cwd or None,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                close_fds=True,
            )
        except OSError as exc:
            if log_file is not subprocess.DEVNULL:
                log_file.close()
            self._fail(key, now, [], f"cannot start {argv[0]!r}: {exc.strerror or exc}")
            return False
        self._procs[key] = _Process(
            key=key,
            popen=popen,
            gpus=chosen,
            started_at=now,
            log_path=log_path,
            log_file=None if log_file is subprocess.DEVNULL else log_file,
        )
        logger.info("started %s (pid %s) on GPUs [%s]", key, popen.pid, ",".join(chosen))
        return True

    def stop(self, key: str, *, grace_seconds: float | None = None) -> bool:
        """Send SIGTERM to the process group of ``key``; SIGKILL follows after the grace.

        Returns False when nothing runs under ``key`` (already ended: nothing to do). Calling
        it again while stopping changes nothing (the first grace period stands).
        """
        proc = self._procs.get(key)
        if proc is None:
            return False
        if proc.stop_requested_at is not None:
            return True
        proc.stop_requested_at = self.clock()
        proc.grace_seconds = self.grace_seconds if grace_seconds is None else grace_seconds
        logger.info("stopping %s: SIGTERM, %ss grace", key, proc.grace_seconds)
        _signal_group(proc.popen.pid, signal.SIGTERM)
        return True

    def stop_all(self, *, grace_seconds: float | None = None) -> None:
        """Stop every running process (agent shutdown)."""
        for key in list(self._procs):
            self.stop(key, grace_seconds=grace_seconds)

    def poll(self) -> list[ProcessExit]:
        """Reap ended processes, SIGKILL overdue stops, and return the exits since last call."""
        now = self.clock()
        for key, proc in list(self._procs.items()):
            code = proc.popen.poll()
            if code is None:
                overdue = (
                    proc.stop_requested_at is not None
                    and not proc.killed
                    and now - proc.stop_requested_at >= proc.grace_seconds
                )
                if overdue:
                    logger.info("%s ignored SIGTERM for %ss: SIGKILL", key, proc.grace_seconds)
                    _signal_group(proc.popen.pid, signal.SIGKILL)
                    proc.killed = True
                continue
            # The leader ended; anything it left behind in its group goes too (GPU memory).
            _signal_group(proc.popen.pid, signal.SIGKILL)
            if proc.log_file is not None:
                proc.log_file.close()
            del self._procs[key]
            self._finished.append(
                ProcessExit(
                    key=key,
                    returncode=code,
                    stopped=proc.stop_requested_at is not None,
                    killed_after_grace=proc.killed,
                    started_at=proc.started_at,
                    ended_at=now,
                    gpus=proc.gpus,
                    log_path=proc.log_path,
                )
            )
            logger.info("%s ended: %s", key, self._finished[-1].message)
        finished, self._finished = self._finished, []
        return finished

    def wait_all(self, timeout: float, interval: float = 0.1) -> list[ProcessExit]:
        """Poll until every process has ended or ``timeout`` passes; return their exits."""
        deadline = time.monotonic() + timeout
        exits = self.poll()
        while self._procs and time.monotonic() < deadline:
            time.sleep(interval)
            exits += self.poll()
        return exits

    def _fail(self, key: str, now: float, gpus: list[str], error: str) -> None:
        logger.warning("%s: %s", key, error)
        self._finished.append(
            ProcessExit(
                key=key,
                returncode=None,
                stopped=False,
                killed_after_grace=False,
                started_at=now,
                ended_at=now,
                gpus=gpus,
                error=error,
            )
        )


def _signal_group(pgid: int, sig: int) -> None:
    """Signal a whole process group; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
