"""The harness's own PostgreSQL cluster and Redis: started, restarted (faults) and stopped here,
on ports nobody else uses."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

from tests.reliability_load.harness.config import DB_NAME, PG_BIN, PG_PORT, REDIS_PORT
from tests.waiting import wait_until


class Services:
    """A private PostgreSQL cluster and Redis, on ports nobody else uses."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.pgdata = workdir / "pg"
        self.pglog = workdir / "pg.log"
        self.redis_dir = workdir / "redis"

    def _as_postgres(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # PostgreSQL refuses to run as root: as root, run its tools as the postgres user; as
        # anyone else, as ourselves.
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run(
            [*prefix, *args],
            check=check, capture_output=True, text=True, timeout=180,
        )  # fmt: skip

    def start(self) -> None:
        """Make and start a fresh PostgreSQL cluster with the harness database, then Redis."""
        for port in (PG_PORT, REDIS_PORT):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    raise SystemExit(f"port {port} is in use: stop whatever holds it first")
        self.pgdata.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.workdir, "postgres")
            shutil.chown(self.pgdata, "postgres")
        os.chmod(self.pgdata, 0o700)
        self._as_postgres(
            str(PG_BIN / "initdb"), "-D", str(self.pgdata), "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        self.start_postgres()
        self._as_postgres(str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(PG_PORT), DB_NAME)
        self.redis_dir.mkdir()
        self.start_redis()

    def _pg_ctl(self, action: str, *extra: str) -> None:
        # The server's output goes to the log file (-l): were it left on pg_ctl's stdout, the
        # server would hold our pipe open and this call would never return.
        options = f"-p {PG_PORT} -k {self.pgdata} -c listen_addresses=127.0.0.1"
        self._as_postgres(
            str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-l", str(self.pglog),
            "-o", f"{options} -c max_connections=200", *extra, "-w", action,
        )  # fmt: skip

    def start_postgres(self) -> None:
        """``pg_ctl start``, waiting until the server accepts connections."""
        self._pg_ctl("start")

    def restart_postgres(self) -> None:
        """``pg_ctl restart -m fast``: every connection is cut, as in a server restart."""
        self._pg_ctl("restart", "-m", "fast")

    def stop_postgres(self) -> None:
        """``pg_ctl stop -m fast`` (nothing said when it is not running)."""
        self._as_postgres(
            str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "stop",
            check=False,
        )  # fmt: skip

    def start_redis(self) -> None:
        """A Redis that keeps nothing on disk, waited for until it answers a ping."""
        subprocess.run(
            ["redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "yes", "--dir", str(self.redis_dir),
             "--pidfile", str(self.redis_dir / "redis.pid"),
             "--logfile", str(self.redis_dir / "redis.log")],
            check=True, timeout=30,
        )  # fmt: skip
        if not wait_until(self.redis_ping, 30, 0.1):
            raise SystemExit("our Redis did not start")

    def redis_ping(self) -> bool:
        """Does our Redis answer PONG?"""
        done = subprocess.run(
            ["redis-cli", "-p", str(REDIS_PORT), "ping"], capture_output=True, timeout=10
        )
        return done.stdout.strip() == b"PONG"

    def stop_redis(self) -> None:
        """``SHUTDOWN NOSAVE``: queued messages are gone, as after a crash."""
        subprocess.run(
            ["redis-cli", "-p", str(REDIS_PORT), "shutdown", "nosave"],
            capture_output=True, timeout=30,
        )  # fmt: skip
        wait_until(lambda: not self.redis_ping(), 30, 0.1)

    def stop(self) -> None:
        """Stop Redis, then PostgreSQL."""
        self.stop_redis()
        self.stop_postgres()
