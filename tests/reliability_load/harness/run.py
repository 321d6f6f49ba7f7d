"""The harness itself: set up the services and the world, start the processes, run locust
(and the faults), verify, report, tear everything down."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from tests.reliability_load.harness.config import (
    PG_PORT,
    PY,
    REDIS_PORT,
    ROOT,
    free_port,
    log,
    service_env,
)
from tests.reliability_load.harness.cpu import cpu_usage
from tests.reliability_load.harness.faults import run_faults
from tests.reliability_load.harness.probes import (
    cycle_done_after,
    healthy_lab_nodes,
    seconds_until,
    sign_in_page_answers,
)
from tests.reliability_load.harness.processes import Supervised, Supervisor
from tests.reliability_load.harness.report import (
    RunFacts,
    add_fault_window_stats,
    endpoint_stats,
    read_requests,
    run_failed,
    summary,
)
from tests.reliability_load.harness.services import Services

LOCUSTFILE = Path(__file__).resolve().parents[1] / "locustfile.py"


class LoadTimes(NamedTuple):
    """When the load began and ended (epoch seconds)."""

    began: float
    ended: float


class Harness:
    """One run: its options, output directory, services, processes and faults."""

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
        self.cpu: dict[str, float] | None = None
        self.env = service_env()

    # -- setup ------------------------------------------------------------------------------

    def manage(self, *args: str) -> None:
        """``manage.py <args>`` on the harness database."""
        subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=self.env, check=True, timeout=600,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip

    def add(self, name: str, args: list[str], *, restart: bool = False, **env: str) -> Supervised:
        """Start a long-running process, supervised (restarted when it dies) if ``restart``."""
        process = Supervised(
            name, args, {**self.env, **env}, self.out / f"{name}.log", restart=restart
        )
        process.spawn()
        self.processes[name] = process
        self.supervisor.processes.append(process)
        return process

    def start_agent(self, agent: dict) -> None:
        """Start (or start again) the node agent of one lab node."""
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
        """Services, the database and world, the server and loop, the agents; warmed up."""
        log(f"services: PostgreSQL on {PG_PORT}, Redis on {REDIS_PORT} (in {self.workdir})")
        self.services.start()
        self.make_world()
        self.start_server_and_loop()
        if seconds_until(lambda: sign_in_page_answers(self.port), limit=60) is None:
            raise SystemExit(f"gunicorn did not answer; see {self.out / 'gunicorn.log'}")
        for agent in self.world["agents"]:
            self.start_agent(agent)
        # Warm: the simulated nodes registered, demo work placed, a cycle done.
        h100 = self.world["clusters"]["h100"]
        if seconds_until(lambda: cycle_done_after(h100, time.time() - 3), limit=90) is None:
            raise SystemExit(f"no scheduling cycle ran; see {self.out / 'worker.log'}")
        lab_up = seconds_until(lambda: healthy_lab_nodes() == len(self.world["agents"]), limit=60)
        if lab_up is None:
            raise SystemExit(f"the lab agents did not register; see {self.out}/agent-*.log")

    def make_world(self) -> None:
        """Migrate, collect static files, load the demo, then the load accounts and lab."""
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

    def start_server_and_loop(self) -> None:
        """gunicorn, the Celery worker and beat (the last two supervised), the supervisor."""
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

    # -- load -------------------------------------------------------------------------------

    def run_locust(self) -> subprocess.Popen:
        """Start locust, headless, for ``--duration`` seconds (it stops itself)."""
        args = [
            PY, "-m", "locust", "-f", str(LOCUSTFILE),
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

    def load(self) -> LoadTimes:
        """Locust (and the faults, with ``--faults``) until locust ends; when it began and
        ended, with the CPU each component used meanwhile in ``self.cpu``."""
        log(f"locust: {self.options.users} clients for {self.options.duration} s "
            f"(run tag {self.run_tag})")  # fmt: skip
        cpu_before = cpu_usage(self.processes, self.services)
        began = time.time()
        locust = self.run_locust()
        if self.options.faults:
            fault_thread = threading.Thread(target=run_faults, args=(self, began))
            fault_thread.start()
            fault_thread.join()
        _, _, rusage = os.wait4(locust.pid, 0)  # locust stops itself after -t
        locust.returncode = 0
        ended = time.time()
        after = cpu_usage(self.processes, self.services)
        self.cpu = {k: round(v - cpu_before.get(k, 0.0), 1) for k, v in after.items()}
        self.cpu["locust"] = round(rusage.ru_utime + rusage.ru_stime, 1)
        return LoadTimes(began, ended)

    # -- results ----------------------------------------------------------------------------

    def verify(self) -> dict:
        """``verify.py`` on the run's database: the correctness checks' figures."""
        done = subprocess.run(
            [PY, "-m", "tests.reliability_load.verify", "--out", str(self.out), "--run",
             self.run_tag],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if done.returncode != 0:
            log(f"verify failed:\n{done.stderr[-3000:]}")
            return {"error": done.stderr[-3000:]}
        return json.loads((self.out / "verify.json").read_text())

    def report(self, checks: dict, began: float, ended: float) -> bool:
        """Print and write the summary and the faults' records; did a check fail?"""
        rows = read_requests(self.out / "requests.csv")
        endpoints = endpoint_stats(rows, self.faults, began, ended)
        add_fault_window_stats(rows, self.faults)
        facts = RunFacts(
            self.mode, self.options.users, self.options.gunicorn_workers, began, ended, self.cpu
        )
        text = summary(facts, endpoints, checks, self.faults)
        (self.out / "summary.md").write_text(text)
        (self.out / "faults.json").write_text(json.dumps(self.faults, indent=1))
        print("\n" + text)
        log(f"raw figures in {self.out}")
        return run_failed(endpoints, checks)

    # -- main -------------------------------------------------------------------------------

    def run(self) -> int:
        """The whole run; 1 when a correctness check failed, else 0."""
        try:
            self.setup()
            began, ended = self.load()
            log("stopping the loop and agents, then verifying")
            for name in ["beat", "worker", *[n for n in self.processes if n.startswith("agent")]]:
                self.processes[name].stop()
            checks = self.verify()
            return 1 if self.report(checks, began, ended) else 0
        finally:
            self.teardown()

    def teardown(self) -> None:
        """Stop every process and service; remove the work directory unless ``--keep``."""
        self.supervisor.halt.set()
        for process in self.processes.values():
            process.stop(timeout=10)
        self.services.stop()
        if not self.options.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)


def parse_options(description: str) -> argparse.Namespace:
    """The command line, with the environment's defaults."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability_load.harness", description=description
    )
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
    return options
