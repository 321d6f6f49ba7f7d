"""The served configuration: gunicorn accepts it, and each value follows its variable."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

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
