"""Load and faults-during-load harness: ``make load`` and ``make faults`` (docs/reliability.md).

Everything runs on services of its own, so killing and restarting them disturbs nobody else
(the shared PostgreSQL on 5432 and Redis on 6379 are never touched):

1. a PostgreSQL 15 cluster made with ``initdb`` in a temporary directory (run as the
   ``postgres`` user), on 127.0.0.1:``LOAD_PG_PORT`` (5440), and a Redis on ``LOAD_REDIS_PORT``
   (6390) that keeps nothing on disk;
2. ``migrate``, ``collectstatic``, ``load_demo`` (the Philly demo organization: 32 x 8 GPUs
   played by the simulated executor), then ``world.py`` (load accounts, sessions, a ``lab``
   cluster of two real node agents);
3. gunicorn (``DEBUG=false``, gthread workers), a Celery worker and a Celery beat (the
   scheduling loop: cycles every 5 s, accounting every 15 s, simulated executor and demo
   replay every 2 s), and two ``python -m scheduler.agent`` processes for the lab nodes;
4. locust, headless, ``LOAD_USERS`` (30) clients for ``DURATION`` seconds (120 for ``load``,
   240 for ``faults``): queue status, submit and the owed-vs-delivered page, with
   ``LOAD_THINK`` ("0.5,2") seconds of think time (``0,0`` saturates the server);
5. with ``--faults``, during the load, one at a time: kill -9 the Celery worker (a supervisor
   loop here restarts it one second later, as systemd's ``Restart=always`` would), restart
   Redis, restart PostgreSQL, kill -9 a node agent and bring it back 30 s later;
6. afterwards ``verify.py``: every acknowledged submit in the database exactly once, no
   workload started twice, ledger == Σ run GPUs x run time per cluster.

It prints a summary table (markdown: per endpoint requests, throughput, p50/p95/p99, errors
in steady state and in fault windows; CPU seconds per component; the checks; per fault the
seconds to each sign of recovery) and writes it with the raw figures to
``var/reliability/<mode>-<UTC time>/``. A benchmark: nothing is asserted on time; the exit
status is 1 only when a correctness check fails (lost/duplicated submit, a workload started
twice, an unbalanced ledger, or an error outside the fault windows).

    .venv/bin/python -m tests.reliability_load.harness [--faults] [--duration S] [--users N]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PG_BIN = Path(os.environ.get("LOAD_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_PORT = int(os.environ.get("LOAD_PG_PORT", "5440"))
REDIS_PORT = int(os.environ.get("LOAD_REDIS_PORT", "6390"))
DB_NAME = "governance_load"
PY = sys.executable
# Recovery is measured until this long after a fault at most (then reported as not recovered).
RECOVERY_LIMIT = 90.0


def in_window(start: float, ms: float, window_start: float, window_end: float) -> bool:
    """Did a request that began at ``start`` (epoch seconds) and took ``ms`` overlap the fault
    window? A request in flight when the fault began counts, not only one begun inside it."""
    return start <= window_end and start + ms / 1000.0 >= window_start


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- Services of our own ----------------------------------------------------------------


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
        self._pg_ctl("start")

    def restart_postgres(self) -> None:
        """``pg_ctl restart -m fast``: every connection is cut, as in a server restart."""
        self._pg_ctl("restart", "-m", "fast")

    def stop_postgres(self) -> None:
        self._as_postgres(
            str(PG_BIN / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "stop",
            check=False,
        )  # fmt: skip

    def start_redis(self) -> None:
        subprocess.run(
            ["redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "yes", "--dir", str(self.redis_dir),
             "--pidfile", str(self.redis_dir / "redis.pid"),
             "--logfile", str(self.redis_dir / "redis.log")],
            check=True, timeout=30,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.redis_ping():
                return
            time.sleep(0.1)
        raise SystemExit("our Redis did not start")

    def redis_ping(self) -> bool:
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
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.redis_ping():
            time.sleep(0.1)

    def stop(self) -> None:
        self.stop_redis()
        self.stop_postgres()


# --- Processes --------------------------------------------------------------------------


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
        with open(self.log_path, "a") as log_file:
            # Its own process group, so a kill takes its children too (systemd's cgroup).
            self.proc = subprocess.Popen(
                self.args, cwd=ROOT, env=self.env, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def signal(self, signum: int) -> None:
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signum)

    def stop(self, timeout: float = 20) -> None:
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
        while not self.halt.wait(0.2):
            for process in self.processes:
                if process.restart and process.proc and process.proc.poll() is not None:
                    time.sleep(1.0)
                    log(f"supervisor: {process.name} exited ({process.proc.returncode}); restart")
                    process.restarts.append(time.time())
                    process.spawn()


# --- The database, read directly for recovery measurements -----------------------------


def db_query(sql: str, params: tuple = ()) -> list[tuple] | None:
    """One query on the harness database; None when it cannot be reached (a fault)."""
    import psycopg

    try:
        with psycopg.connect(
            host="127.0.0.1", port=PG_PORT, user="postgres", dbname=DB_NAME, connect_timeout=2
        ) as conn:
            return conn.execute(sql, params).fetchall()
    except psycopg.Error:
        return None


def wait_until(predicate, limit: float = RECOVERY_LIMIT, interval: float = 0.25) -> float | None:
    """Seconds until ``predicate()`` is truthy, or None after ``limit``."""
    began = time.time()
    while time.time() - began < limit:
        if predicate():
            return time.time() - began
        time.sleep(interval)
    return None


def cycle_done_after(cluster_id: int, at: float) -> bool:
    rows = db_query(
        "SELECT count(*) FROM scheduler_schedulingcycle WHERE cluster_id = %s"
        " AND started_at > to_timestamp(%s)",
        (cluster_id, at),
    )
    return bool(rows and rows[0][0])


def order_acknowledged_after(at: float, node: str | None = None) -> bool:
    sql = (
        "SELECT count(*) FROM scheduler_order o JOIN scheduler_node n ON n.id = o.node_id"
        " WHERE o.acknowledged_at > to_timestamp(%s)"
    )
    params: tuple = (at,)
    if node:
        sql += " AND n.name = %s"
        params = (at, node)
    rows = db_query(sql, params)
    return bool(rows and rows[0][0])


def node_state(node: str) -> str | None:
    rows = db_query("SELECT state FROM scheduler_node WHERE name = %s", (node,))
    return rows[0][0] if rows else None


def cpu_seconds_by_group() -> tuple[dict[int, float], dict[int, float], dict[int, int]]:
    """CPU seconds (user + system) of live processes by process group and by pid, and each
    pid's parent, from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    groups: dict[int, float] = {}
    pids: dict[int, float] = {}
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        pids[pid] = seconds
        groups[int(fields[2])] = groups.get(int(fields[2]), 0.0) + seconds
    return groups, pids, parents


# --- The harness ------------------------------------------------------------------------


class Harness:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.mode = "faults" if options.faults else "load"
        self.run_tag = f"lt{datetime.now(UTC):%H%M%S}{secrets.token_hex(2)}"
        self.out = ROOT / "var" / "reliability" / f"{self.mode}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
        self.out.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="gov-load-"))
        self.services = Services(self.workdir)
        self.port = free_port()
        self.supervisor = Supervisor()
        self.processes: dict[str, Supervised] = {}
        self.world: dict = {}
        self.faults: list[dict] = []
        self.env = {
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

    # -- setup ------------------------------------------------------------------------------

    def manage(self, *args: str) -> None:
        subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=self.env, check=True, timeout=600,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip

    def add(self, name: str, args: list[str], *, restart: bool = False, **env: str) -> Supervised:
        process = Supervised(
            name, args, {**self.env, **env}, self.out / f"{name}.log", restart=restart
        )
        process.spawn()
        self.processes[name] = process
        self.supervisor.processes.append(process)
        return process

    def start_agent(self, agent: dict) -> None:
        name = f"agent-{agent['node']}"
        gpus = f"0-{self.world['lab_gpus_per_node'] - 1}"
        args = [
            PY, "-m", "scheduler.agent", "--server", f"http://127.0.0.1:{self.port}",
            "--node", agent["node"], "--gpus", gpus, "--poll-seconds", "1",
            "--heartbeat-seconds", "5", "--grace-seconds", "5",
        ]  # fmt: skip
        if name in self.processes:
            self.processes[name].spawn()
        else:
            self.add(name, args, GPU_AGENT_TOKEN=agent["token"])

    def setup(self) -> None:
        log(f"services: PostgreSQL on {PG_PORT}, Redis on {REDIS_PORT} (in {self.workdir})")
        self.services.start()
        log("migrate, collectstatic, load_demo, load accounts")
        self.manage("migrate", "--noinput")
        self.manage("collectstatic", "--noinput")
        self.manage("load_demo")
        world_path = self.out / "world.json"
        subprocess.run(
            [PY, "-m", "tests.reliability_load.world", "--out", str(world_path),
             "--researchers", str(self.options.users)],
            cwd=ROOT, env=self.env, check=True, timeout=300,
        )  # fmt: skip
        self.world = json.loads(world_path.read_text())
        workers = str(self.options.gunicorn_workers)
        log(f"gunicorn on 127.0.0.1:{self.port} ({workers} workers x 4 threads), worker, beat")
        # The served configuration (governance/gunicorn_conf.py), with this run's port.
        self.add(
            "gunicorn",
            [PY, "-m", "gunicorn", "-c", "python:governance.gunicorn_conf",
             "governance.wsgi:application"],
            GUNICORN_BIND=f"127.0.0.1:{self.port}", GUNICORN_WORKERS=workers,
            GUNICORN_THREADS="4",
        )  # fmt: skip
        self.add("worker", [
            PY, "-m", "celery", "-A", "governance", "worker", "--concurrency=2",
            "--loglevel=WARNING", "-Q", "governance", "--hostname", "load-worker@%h",
            "--without-gossip", "--without-mingle",
        ], restart=True)  # fmt: skip
        self.add("beat", [
            PY, "-m", "celery", "-A", "governance", "beat", "--loglevel=WARNING",
            "--schedule", str(self.workdir / "beat-schedule"),
        ], restart=True)  # fmt: skip
        self.supervisor.start()
        if wait_until(self._http_ok, limit=60) is None:
            raise SystemExit(f"gunicorn did not answer; see {self.out / 'gunicorn.log'}")
        for agent in self.world["agents"]:
            self.start_agent(agent)
        # Warm: the simulated nodes registered, demo work placed, a cycle done.
        h100 = self.world["clusters"]["h100"]
        if wait_until(lambda: cycle_done_after(h100, time.time() - 3), limit=90) is None:
            raise SystemExit(f"no scheduling cycle ran; see {self.out / 'worker.log'}")
        lab_up = wait_until(
            lambda: (db_query(
                "SELECT count(*) FROM scheduler_node WHERE name LIKE 'lab-%%'"
                " AND state = 'healthy'") or [(0,)])[0][0] == len(self.world["agents"]),
            limit=60,
        )  # fmt: skip
        if lab_up is None:
            raise SystemExit(f"the lab agents did not register; see {self.out}/agent-*.log")

    def _http_ok(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}/accounts/login/", timeout=2
            ) as response:
                return response.status == 200
        except OSError:
            return False

    # -- load and faults --------------------------------------------------------------------

    def run_locust(self) -> subprocess.Popen:
        args = [
            PY, "-m", "locust", "-f", str(Path(__file__).with_name("locustfile.py")),
            "--headless", "-u", str(self.options.users), "-r", str(self.options.users),
            "-t", f"{self.options.duration}s", "--host", f"http://127.0.0.1:{self.port}",
            "--csv", str(self.out / "locust"), "--only-summary", "--stop-timeout", "10",
            "--exit-code-on-error", "0", "--loglevel", "WARNING",
        ]  # fmt: skip
        env = {
            **os.environ,
            "LOAD_WORLD": str(self.out / "world.json"),
            "LOAD_RUN": self.run_tag,
            "LOAD_OUT": str(self.out),
        }
        log_file = open(self.out / "locust.log", "w")  # noqa: SIM115 - child owns it
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)

    def fault(self, name: str, inject, measures: dict, restore=None) -> None:
        """Inject one fault, measure each recovery signal in parallel, record the window."""
        record: dict = {"fault": name, "start": time.time()}
        log(f"fault: {name}")
        try:
            inject()
            record["injected"] = time.time()
            if restore is not None:
                restore(record)
        except Exception as exc:  # recorded and reported; the next fault still runs
            record["error"] = repr(exc)
            log(f"fault: {name} could not be injected or undone: {exc!r}")
        results: dict = {}

        since = record.get("injected", record["start"])

        def measure(key: str, predicate) -> None:
            elapsed = wait_until(lambda: predicate(since))
            results[key] = None if elapsed is None else round(time.time() - record["start"], 1)

        threads = [
            threading.Thread(target=measure, args=(key, pred), daemon=True)
            for key, pred in measures.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        record.update(results)
        record["end"] = time.time()
        log(f"fault: {name} recovered: {results}")
        self.faults.append(record)

    def run_faults(self, began: float) -> None:
        h100 = self.world["clusters"]["h100"]
        lab = self.world["clusters"]["lab"]
        agent = self.world["agents"][0]
        gap = self.options.fault_gap

        def at(offset: float) -> None:
            time.sleep(max(0.0, began + offset - time.time()))

        # Each recovery signal is a predicate of ``t``, the moment the fault was injected
        # (the service is back up by then, except the worker and agent, which come back by
        # themselves or later): it must happen after ``t``. Times are reported from the
        # fault's start.
        def cycles_and_orders() -> dict:
            return {
                "cycle_h100_s": lambda t: cycle_done_after(h100, t),
                "cycle_lab_s": lambda t: cycle_done_after(lab, t),
                "order_acknowledged_s": lambda t: order_acknowledged_after(t),
            }

        at(gap)
        worker = self.processes["worker"]
        self.fault(
            "kill -9 the Celery worker", lambda: worker.signal(signal.SIGKILL),
            {**cycles_and_orders(),
             "worker_restarted_s": lambda t: bool(worker.restarts and worker.restarts[-1] > t)},
        )  # fmt: skip
        at(2 * gap)
        self.fault(
            "restart Redis (SHUTDOWN NOSAVE, start)",
            lambda: (self.services.stop_redis(), self.services.start_redis()),
            {**cycles_and_orders(), "redis_up_s": lambda t: self.services.redis_ping()},
        )  # fmt: skip
        at(3 * gap)
        self.fault(
            "restart PostgreSQL (pg_ctl restart -m fast)", self.services.restart_postgres,
            {**cycles_and_orders(),
             "postgres_up_s": lambda t: db_query("SELECT 1") is not None},
        )  # fmt: skip
        at(4 * gap)
        process = self.processes[f"agent-{agent['node']}"]
        down_for = self.options.agent_down

        def bring_back(record: dict) -> None:
            # Wait until the server has noticed (heartbeat timeout: node down, runs requeued),
            # at least ``agent_down`` seconds, then start the agent again.
            wait_until(lambda: node_state(agent["node"]) == "down", limit=60)
            record["node_marked_down_s"] = round(time.time() - record["start"], 1)
            time.sleep(max(0.0, record["start"] + down_for - time.time()))
            self.start_agent(agent)
            record["agent_restarted_s"] = round(time.time() - record["start"], 1)
            record["injected"] = time.time()  # recovery is measured from the restart

        self.fault(
            f"kill -9 node agent {agent['node']}, back after {down_for:.0f} s",
            lambda: process.signal(signal.SIGKILL),
            {"node_healthy_again_s": lambda t: node_state(agent["node"]) == "healthy",
             "order_acknowledged_on_node_s": lambda t: order_acknowledged_after(t, agent["node"])},
            restore=bring_back,
        )  # fmt: skip

    # -- results ----------------------------------------------------------------------------

    def cpu_usage(self) -> dict[str, float]:
        """CPU seconds used so far by each component's live processes: the web server, the
        loop (worker, beat), PostgreSQL (the postmaster and its children), Redis, agents.

        Taken before and after the run; the difference says where the cores went (a process
        restarted by a fault counts from its restart; a connection that ended is not counted).
        """
        groups, pids, parents = cpu_seconds_by_group()
        usage: dict[str, float] = {}
        for name, process in self.processes.items():
            if process.proc and process.proc.poll() is None:
                key = "agents" if name.startswith("agent") else name
                usage[key] = usage.get(key, 0.0) + groups.get(process.proc.pid, 0.0)
        pid_file = self.services.pgdata / "postmaster.pid"
        if pid_file.exists():
            postmaster = int(pid_file.read_text().split()[0])
            usage["postgresql"] = pids.get(postmaster, 0.0) + sum(
                seconds for pid, seconds in pids.items() if parents.get(pid) == postmaster
            )
        redis_pid = self.services.redis_dir / "redis.pid"
        if redis_pid.exists():
            usage["redis"] = pids.get(int(redis_pid.read_text().strip()), 0.0)
        return usage

    def verify(self) -> dict:
        done = subprocess.run(
            [PY, "-m", "tests.reliability_load.verify", "--out", str(self.out), "--run",
             self.run_tag],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if done.returncode != 0:
            log(f"verify failed:\n{done.stderr[-3000:]}")
            return {"error": done.stderr[-3000:]}
        return json.loads((self.out / "verify.json").read_text())

    def stats(self, began: float, ended: float) -> dict:
        """Per endpoint: requests, throughput, percentiles, errors in and out of fault windows."""
        rows = []
        with open(self.out / "requests.csv", newline="") as f:
            for row in csv.DictReader(f):
                rows.append((float(row["start"]), row["name"], float(row["ms"]),
                             int(row["status"]), row["error"]))  # fmt: skip
        windows = [(f["start"], f["end"]) for f in self.faults]

        def in_fault(r) -> bool:
            return any(in_window(r[0], r[2], start, end) for start, end in windows)

        result = {}
        for name in sorted({r[1] for r in rows}):
            mine = [r for r in rows if r[1] == name]
            steady = [r for r in mine if not in_fault(r)]
            ms = sorted(r[2] for r in steady) or [0.0]

            def pct(q: float, values=ms) -> float:
                return round(values[min(len(values) - 1, int(q * len(values)))], 1)

            def bad(r) -> bool:
                return r[3] >= 400 or r[3] == 0 or bool(r[4])

            result[name] = {
                "requests": len(mine),
                "rps": round(len(mine) / (ended - began), 1),
                "p50_ms": round(statistics.median(ms), 1),
                "p95_ms": pct(0.95),
                "p99_ms": pct(0.99),
                "errors_steady": sum(1 for r in steady if bad(r)),
                "requests_in_fault_windows": len(mine) - len(steady),
                "errors_in_fault_windows": sum(1 for r in mine if in_fault(r) and bad(r)),
            }
        # Per fault: failed requests in its window, and when submits succeeded again.
        for fault in self.faults:
            window = [r for r in rows if in_window(r[0], r[2], fault["start"], fault["end"])]
            failed = [r for r in window if r[3] >= 400 or r[3] == 0 or r[4]]
            fault["requests_in_window"] = len(window)
            fault["failed_in_window"] = len(failed)
            fault["last_failure_s"] = (
                round(max(r[0] for r in failed) - fault["start"], 1) if failed else None
            )
            submits = [r for r in window if r[1].startswith("submit")]
            last_fail = max((r[0] for r in submits if r[3] != 201), default=None)
            if last_fail is None:
                fault["submits_ok_again_s"] = 0.0
            else:
                later = [r[0] for r in rows if r[1].startswith("submit") and r[3] == 201
                         and r[0] > last_fail]  # fmt: skip
                fault["submits_ok_again_s"] = (
                    round(min(later) - fault["start"], 1) if later else None
                )
        return result

    def summary(self, endpoints: dict, checks: dict, began: float, ended: float) -> str:
        cores = os.cpu_count()
        lines = [
            f"### {self.mode} run {datetime.fromtimestamp(began, UTC):%Y-%m-%d %H:%M} UTC",
            "",
            f"{self.options.users} locust clients (think time "
            f"{os.environ.get('LOAD_THINK', '0.5,2').replace(',', ' to ')} s) "
            f"for {ended - began:.0f} s against gunicorn "
            f"({self.options.gunicorn_workers} workers x 4 threads, DEBUG=false) with a Celery "
            f"worker (2 processes) and beat, the simulated executor (h100, 32 x 8 GPUs) and "
            f"2 real node agents (lab, 2 x 4 GPUs); {cores} cores shared by everything "
            "(PostgreSQL, Redis, locust included).",
            "",
            "| endpoint | requests | req/s | p50 ms | p95 ms | p99 ms | errors (steady) "
            "| requests / errors in fault windows |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, s in endpoints.items():
            lines.append(
                f"| {name} | {s['requests']} | {s['rps']} | {s['p50_ms']} | {s['p95_ms']} "
                f"| {s['p99_ms']} | {s['errors_steady']} "
                f"| {s['requests_in_fault_windows']} / {s['errors_in_fault_windows']} |"
            )
        total = sum(s["requests"] for s in endpoints.values())
        lines.append(
            f"| all | {total} | {total / (ended - began):.1f} | | | "
            f"| {sum(s['errors_steady'] for s in endpoints.values())} "
            f"| {sum(s['requests_in_fault_windows'] for s in endpoints.values())} / "
            f"{sum(s['errors_in_fault_windows'] for s in endpoints.values())} |"
        )
        if getattr(self, "cpu", None):
            lines += [
                "",
                "CPU seconds used by each component during the run (2 cores x "
                f"{ended - began:.0f} s = {2 * (ended - began):.0f} available): "
                + ", ".join(f"{k} {v}" for k, v in sorted(self.cpu.items(), key=lambda x: -x[1]))
                + ".",
            ]
        sub = checks.get("submits", {})
        lines += [
            "",
            f"Submits: {sub.get('submits_attempted')} sent, {sub.get('submits_acknowledged')} "
            f"acknowledged (201), {sub.get('acknowledged_found_once')} of them in the database "
            f"exactly once; missing {len(sub.get('missing', []))}, duplicated "
            f"{len(sub.get('duplicated', []))}, not acknowledged but stored "
            f"{sub.get('unacknowledged_but_stored')}.",
            "",
            "| cluster | workloads | runs | cycles (time in them) | orders acked | runs failed | runs open at end "
            "| started twice, starts off placement | ledger GPU-s | Σ runs GPU-s | balances |",
            "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
        ]
        for slug, c in checks.get("clusters", {}).items():
            lines.append(
                f"| {slug} | {c['workloads']} | {c['runs']} | {c['cycles']} ({c['cycle_seconds']} s, "
                f"mean {c['cycle_mean_ms']} ms, ≤ {c['cycle_max_pending']} pending, "
                f"{c.get('cycles_kept', 0)} with a kept engine) "
                f"| {c['orders_acknowledged']} | {c['runs_by_end_reason'].get('failed', 0)} "
                f"| {c['runs_open_at_end']} | {c['started_twice']}, "
                f"{c['starts_off_placement'] + c['duplicate_start_orders']} "
                f"| {float(c['ledger_gpu_seconds']):.1f} | {float(c['runs_gpu_seconds']):.1f} "
                f"| {'yes' if c['ledger_balances'] else 'NO'} |"
            )
        if self.faults:
            keys = [
                "worker_restarted_s", "redis_up_s", "postgres_up_s", "node_marked_down_s",
                "agent_restarted_s", "node_healthy_again_s", "submits_ok_again_s",
                "cycle_h100_s", "cycle_lab_s", "order_acknowledged_s",
                "order_acknowledged_on_node_s",
            ]  # fmt: skip
            lines += [
                "",
                "Seconds from the fault to each sign of recovery (— : not applicable):",
                "",
                "| fault | "
                + " | ".join(k.removesuffix("_s").replace("_", " ") for k in keys)
                + " | requests / failed in window |",
                "|---|" + "---:|" * (len(keys) + 1),
            ]
            for f in self.faults:
                cells = [
                    "—" if k not in f else ("not within 90 s" if f[k] is None else f"{f[k]}")
                    for k in keys
                ]
                lines.append(
                    f"| {f['fault']} | "
                    + " | ".join(cells)
                    + f" | {f['requests_in_window']} / {f['failed_in_window']}"
                    + (f", last at {f['last_failure_s']} s" if f["last_failure_s"] else "")
                    + " |"
                )
        return "\n".join(lines) + "\n"

    # -- main -------------------------------------------------------------------------------

    def run(self) -> int:
        try:
            self.setup()
            log(f"locust: {self.options.users} clients for {self.options.duration} s "
                f"(run tag {self.run_tag})")  # fmt: skip
            cpu_before = self.cpu_usage()
            began = time.time()
            locust = self.run_locust()
            if self.options.faults:
                fault_thread = threading.Thread(target=self.run_faults, args=(began,))
                fault_thread.start()
                fault_thread.join()
            _, _, rusage = os.wait4(locust.pid, 0)  # locust stops itself after -t
            locust.returncode = 0
            ended = time.time()
            after = self.cpu_usage()
            self.cpu = {k: round(v - cpu_before.get(k, 0.0), 1) for k, v in after.items()}
            self.cpu["locust"] = round(rusage.ru_utime + rusage.ru_stime, 1)
            log("stopping the loop and agents, then verifying")
            for name in ["beat", "worker", *[n for n in self.processes if n.startswith("agent")]]:
                self.processes[name].stop()
            checks = self.verify()
            endpoints = self.stats(began, ended)
            text = self.summary(endpoints, checks, began, ended)
            (self.out / "summary.md").write_text(text)
            (self.out / "faults.json").write_text(json.dumps(self.faults, indent=1))
            print("\n" + text)
            log(f"raw figures in {self.out}")
            failed = "error" in checks
            failed |= any(s["errors_steady"] for s in endpoints.values())
            sub = checks.get("submits", {})
            failed |= bool(sub.get("missing") or sub.get("duplicated") or sub.get("wrong_id"))
            for c in checks.get("clusters", {}).values():
                failed |= c["started_twice"] != "none" or not c["ledger_balances"]
                failed |= bool(c["starts_off_placement"] or c["duplicate_start_orders"])
            return 1 if failed else 0
        finally:
            self.teardown()

    def teardown(self) -> None:
        self.supervisor.halt.set()
        for process in self.processes.values():
            process.stop(timeout=10)
        self.services.stop()
        if not self.options.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", action="store_true", help="inject the four faults")
    parser.add_argument("--duration", type=int, default=int(os.environ.get("DURATION", "0")))
    parser.add_argument("--users", type=int, default=int(os.environ.get("LOAD_USERS", "30")))
    parser.add_argument(
        "--gunicorn-workers", type=int, default=int(os.environ.get("LOAD_GUNICORN_WORKERS", "3"))
    )
    parser.add_argument("--fault-gap", type=float, default=45.0,
                        help="seconds between the starts of two faults (the first after one gap)")  # fmt: skip
    parser.add_argument("--agent-down", type=float, default=30.0)
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL data dir")
    options = parser.parse_args()
    if not options.duration:
        options.duration = 240 if options.faults else 120
    return Harness(options).run()


if __name__ == "__main__":
    sys.exit(main())
