"""Where the harness's own services listen, the environment its processes share, its log line."""

from __future__ import annotations

import os
import secrets
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PG_BIN = Path(os.environ.get("LOAD_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_PORT = int(os.environ.get("LOAD_PG_PORT", "5440"))
REDIS_PORT = int(os.environ.get("LOAD_REDIS_PORT", "6390"))
DB_NAME = "governance_load"
PY = sys.executable
# Recovery is measured until this long after a fault at most (then reported as not recovered).
RECOVERY_LIMIT = 90.0


def log(message: str) -> None:
    """One timestamped progress line on stdout."""
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def free_port() -> int:
    """A TCP port nobody listens on now (for gunicorn)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_env() -> dict[str, str]:
    """The environment of every process of the run: our own database and Redis, production
    settings (``DEBUG=false``) and a fast scheduling loop."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "governance.settings",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{PG_PORT}/{DB_NAME}",
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{REDIS_PORT}/0",
        "CELERY_TASK_DEFAULT_QUEUE": "governance",
        "DEBUG": "false",
        "SECRET_KEY": "load-" + secrets.token_hex(32),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "false",
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
        "DB_CONN_MAX_AGE": "60",
        "LOG_LEVEL": "WARNING",
        "SCHEDULER_CYCLE_SECONDS": "5",
        "SCHEDULER_ACCOUNT_SECONDS": "15",
        "SCHEDULER_HEARTBEAT_CHECK_SECONDS": "5",
        "SCHEDULER_AGENT_TIMEOUT_SECONDS": "20",
        "SCHEDULER_STOP_GRACE_SECONDS": "5",
        "SIMULATED_EXECUTOR_ENABLED": "true",
        "DEMO_REPLAY_ENABLED": "true",
    }
