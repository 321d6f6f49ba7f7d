"""The run's long-running processes (gunicorn, Celery worker and beat, node agents) and the
supervisor that restarts the ones that die, as systemd would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability_load.harness.config import ROOT, log


@dataclass
class Supervised:
    """One long-running process; with ``restart`` a loop restarts it when it dies."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    restart: bool = False
    proc: subprocess.Popen | None = None
    restarts: list[float] = field(default_factory=list)

    def spawn(self) -> None:
        """Start the process, its output appended to its log."""
        with open(self.log_path, "a") as log_file:
            # Its own process group, so a kill takes its children too (systemd's cgroup).
            self.proc = subprocess.Popen(
                self.args, cwd=ROOT, env=self.env, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process group, if the process still runs."""
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signum)

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; never restarted again."""
        self.restart = False
        if self.proc is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


class Supervisor(threading.Thread):
    """Restarts dead processes that ask for it one second after they die, like systemd's
    ``Restart=always`` with ``RestartSec=1``."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="supervisor")
        self.processes: list[Supervised] = []
        self.halt = threading.Event()

    def run(self) -> None:
        """Look at the processes every 0.2 s until halted."""
        while not self.halt.wait(0.2):
            for process in self.processes:
                if process.restart and process.proc and process.proc.poll() is not None:
                    time.sleep(1.0)  # RestartSec=1: a deliberate delay, not a wait on anything
                    log(f"supervisor: {process.name} exited ({process.proc.returncode}); restart")
                    process.restarts.append(time.time())
                    process.spawn()
