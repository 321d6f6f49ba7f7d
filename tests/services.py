"""Check (and where possible start) the real services the test suite runs against.

The suite uses the real PostgreSQL, Redis and a Celery worker. Missing services are started
with the command from the machine's service notes when that command exists here; otherwise
the run stops with a message naming the service and how to start it. Never a silent skip.
"""

from __future__ import annotations

import glob
import shutil
import socket
import subprocess
from dataclasses import dataclass
from urllib.parse import urlparse

from tests.waiting import wait_until


@dataclass(frozen=True)
class Service:
    """A network service the tests need, and the shell command that starts it."""

    name: str
    host: str
    port: int
    start_command: str
    binary: str


def _postgres_start_command() -> str:
    versions = sorted(p.rsplit("/", 1)[-1] for p in glob.glob("/etc/postgresql/*"))
    version = versions[-1] if versions else "<version>"
    return f"pg_ctlcluster --skip-systemctl-redirect {version} main start"


def required_services(database_url: str, broker_url: str) -> list[Service]:
    """The services named by the test settings' database and broker URLs."""
    services = []
    db = urlparse(database_url)
    if db.scheme.startswith("postgres"):
        services.append(
            Service(
                "PostgreSQL",
                db.hostname or "127.0.0.1",
                db.port or 5432,
                _postgres_start_command(),
                "pg_ctlcluster",
            )
        )
    broker = urlparse(broker_url)
    if broker.scheme.startswith("redis"):
        services.append(
            Service(
                "Redis",
                broker.hostname or "127.0.0.1",
                broker.port or 6379,
                'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" '
                "--appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log",
                "redis-server",
            )
        )
    return services


def is_listening(host: str, port: int, timeout: float = 1.0) -> bool:
    """Return whether a TCP connection to host:port succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ensure_running(service: Service, wait_seconds: float = 30.0) -> str | None:
    """Start ``service`` if it is down and its start command exists; return an error or None."""
    if is_listening(service.host, service.port):
        return None
    if shutil.which(service.binary) is None:
        return (
            f"{service.name} is not reachable at {service.host}:{service.port} and "
            f"'{service.binary}' is not installed here. Install and start it: "
            f"{service.start_command}"
        )
    subprocess.run(service.start_command, shell=True, check=False, capture_output=True)
    if wait_until(lambda: is_listening(service.host, service.port), wait_seconds, 0.5):
        return None
    return (
        f"{service.name} is not reachable at {service.host}:{service.port} and starting it "
        f"failed. Start it by hand (as root): {service.start_command}"
    )
