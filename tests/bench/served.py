"""gunicorn serving the project against the test database, as deployed, and a client that
submits workloads to it over one keep-alive connection (the submit load benchmarks)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.db import connection

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
# The served configuration (governance/gunicorn_conf.py), unless these override it.
WORKERS = os.environ.get("BENCH_GUNICORN_WORKERS", str((os.cpu_count() or 1) + 1))
THREADS = os.environ.get("BENCH_GUNICORN_THREADS", "4")


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def collect_static(env: dict) -> None:
    """``manage.py collectstatic`` as the server's settings see it, when ``static/`` holds a
    file newer than the collected manifest: with ``DEBUG=false`` every page names its static
    files through the manifest, and a fresh clone has none (each page would be a 500).
    Collecting and compressing takes about 20 s, so an up-to-date manifest is kept."""
    manifest = ROOT / "var" / "staticfiles" / "staticfiles.json"
    if manifest.exists():
        collected = manifest.stat().st_mtime
        if all(f.stat().st_mtime <= collected for f in (ROOT / "static").rglob("*") if f.is_file()):
            return
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=ROOT, env=env, check=True,
    )  # fmt: skip


class Gunicorn:
    """gunicorn serving the project on 127.0.0.1:<free port>, against the test database."""

    def __init__(self, queue: str, secret_key: str | None = None) -> None:
        self.port = free_port()
        base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        env = {
            **os.environ,
            "DATABASE_URL": f"{base}/{connection.settings_dict['NAME']}",
            "DEBUG": "false",
            "SECRET_KEY": secret_key or "bench-" + uuid.uuid4().hex * 2,
            "SECURE_SSL_REDIRECT": "false",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DB_CONN_MAX_AGE": "60",
            "CELERY_TASK_DEFAULT_QUEUE": queue,
            "LOG_LEVEL": "WARNING",
            "GUNICORN_BIND": f"127.0.0.1:{self.port}",
            "GUNICORN_WORKERS": WORKERS,
            "GUNICORN_THREADS": THREADS,
        }
        self.log_path = ROOT / "var" / f"bench-gunicorn-{self.port}.log"
        self.log_path.parent.mkdir(exist_ok=True)
        collect_static(env)
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "gunicorn", "-c", "python:governance.gunicorn_conf",
                "governance.wsgi:application",
            ],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        if wait_until(self._listening, 60, stop_if=lambda: self.proc.poll() is not None):
            return
        self.stop()
        raise AssertionError(f"gunicorn did not start:\n{self.log_path.read_text()[-3000:]}")

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Client:
    """One keep-alive connection submitting as one researcher."""

    def __init__(self, port: int, token: str, project: int) -> None:
        self.port, self.token, self.project = port, token, project
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.count = 0

    def submit(self) -> tuple[float, int]:
        """One submit; ``(seconds, status)`` with status 0 when no answer came."""
        self.count += 1
        body = json.dumps({
            "project": self.project, "gpus": 1 + self.count % 8, "min_runtime_seconds": 1800,
            "name": f"load-{self.count}", "launch_spec": {"command": ["python", "train.py"]},
        })  # fmt: skip
        headers = {"Authorization": f"Token {self.token}", "Content-Type": "application/json"}
        began = time.perf_counter()
        try:
            self.conn.request("POST", "/api/workloads/", body, headers)
            response = self.conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            status = 0
        return time.perf_counter() - began, status


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
