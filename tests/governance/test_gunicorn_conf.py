"""The served configuration: gunicorn accepts it, and each value follows its variable."""

from __future__ import annotations

import http.client
import importlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_gunicorn_accepts_the_served_configuration():
    env = {**os.environ, "DEBUG": "true"}
    checked = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--check-config", "-c",
         "python:governance.gunicorn_conf", "governance.wsgi:application"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr[-2000:]


def test_connections_per_worker_follow_the_threads_unless_set(monkeypatch):
    import governance.gunicorn_conf as conf

    monkeypatch.setenv("GUNICORN_THREADS", "6")
    monkeypatch.delenv("GUNICORN_WORKER_CONNECTIONS", raising=False)
    monkeypatch.setenv("GUNICORN_WORKERS", "7")
    conf = importlib.reload(conf)
    assert (conf.workers, conf.threads, conf.worker_connections) == (7, 6, 30)
    assert conf.worker_class == "gthread"
    monkeypatch.setenv("GUNICORN_WORKER_CONNECTIONS", "12")
    assert importlib.reload(conf).worker_connections == 12


@pytest.mark.django_db
def test_a_worker_started_with_it_serves_pages(tmp_path):
    """The worker hook (every view loaded, then frozen) runs, and the worker answers (on
    the test database)."""
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        url = (
            f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        )
    else:
        url = f"sqlite:///{db['NAME']}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "DATABASE_URL": url, "DEBUG": "true", "GUNICORN_BIND": f"127.0.0.1:{port}",
           "GUNICORN_WORKERS": "1", "GUNICORN_LOG_LEVEL": "info"}  # fmt: skip
    log = tmp_path / "gunicorn.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:governance.gunicorn_conf",
             "governance.wsgi:application"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            status = wait_until(
                lambda: _login_status(port), timeout=60, stop_if=lambda: server.poll() is not None
            )
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert status == 200, log.read_text()[-3000:]
    assert "Exception" not in log.read_text()


def _login_status(port: int) -> int | None:
    """The sign-in page's status code, or None while nothing answers on ``port``."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/accounts/login/", headers={"Host": "127.0.0.1"})
        return conn.getresponse().status
    except OSError:
        return None


@pytest.mark.parametrize("value", ["abc", "0", "-2", "3.5", "٣"])
def test_a_setting_that_is_not_a_whole_number_is_refused_by_name(monkeypatch, value):
    import governance.gunicorn_conf as conf

    monkeypatch.setenv("GUNICORN_WORKERS", value)
    with pytest.raises(SystemExit, match="GUNICORN_WORKERS must be a whole number"):
        importlib.reload(conf)
    monkeypatch.delenv("GUNICORN_WORKERS")
    importlib.reload(conf)
