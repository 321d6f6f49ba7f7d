"""Benchmark: the submit API under 50 concurrent clients for 60 s, served by gunicorn.

gunicorn runs on 127.0.0.1 (a free port) against the test database with ``DEBUG=false``,
persistent database connections and the served configuration (``governance/gunicorn_conf.py``),
as deployed; each submit also enqueues a scheduling cycle
on Redis (a private queue, deleted afterwards, so no worker picks the messages up). 50 client
threads, each with its own keep-alive connection and a researcher's token, submit
workloads back to back until the minute is over.

Recorded in ``extra_info``: requests, errors (anything but 201, or no answer), p50/p95/p99
latency of every request and throughput, which is what this closed loop is judged on (at
least 150 submits per second at saturation, printed). The benchmark's own rounds are the
50th client's submits, back to back like the others'. The second benchmark offers submits
in an open loop at 50 per second and is judged on their p95 (100 ms). Nothing here asserts
on time. ``BENCH_SUBMIT_SECONDS`` / ``BENCH_SUBMIT_CLIENTS`` / ``BENCH_SUBMIT_RATE`` shorten,
narrow or change a local run.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from governance.models import Allocation, Cluster, Organization, Program, Project
from scheduler.models import Workload
from tests.factories import UserFactory, researcher_of

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = int(os.environ.get("BENCH_SUBMIT_CLIENTS", "50"))
SECONDS = float(os.environ.get("BENCH_SUBMIT_SECONDS", "60"))
# The served configuration (governance/gunicorn_conf.py), unless these override it.
WORKERS = os.environ.get("BENCH_GUNICORN_WORKERS", str((os.cpu_count() or 1) + 1))
THREADS = os.environ.get("BENCH_GUNICORN_THREADS", "4")
TARGET_PER_SECOND = 150


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_world(researchers: int = 10) -> tuple[list[str], list[int]]:
    """An organization, a 32 x 8 cluster, four budgeted projects; researchers with tokens."""
    from datetime import timedelta
    from decimal import Decimal

    from django.utils import timezone

    admin = UserFactory()
    org = Organization.objects.create(name="Load", slug="load")
    cluster = Cluster.objects.create(
        organization=org, name="h100", slug="h100", gpu_type="h100", nodes=32, gpus_per_node=8
    )
    program = Program.objects.create(organization=org, name="Research", slug="research")
    since = timezone.now() - timedelta(days=1)
    Allocation.objects.create(
        cluster=cluster, program=program, percent=Decimal(100), valid_from=since, set_by=admin,
        reason="bench",
    )  # fmt: skip
    projects = []
    for i in range(4):
        project = Project.objects.create(program=program, name=f"Team {i}", slug=f"team-{i}")
        Allocation.objects.create(
            cluster=cluster, project=project, percent=Decimal(25), valid_from=since,
            set_by=admin, reason="bench",
        )  # fmt: skip
        projects.append(project)
    tokens, project_ids = [], []
    for i in range(researchers):
        user = UserFactory(username=f"load-researcher-{i}")
        project = projects[i % len(projects)]
        researcher_of(project, user)
        tokens.append(Token.objects.create(user=user).key)
        project_ids.append(project.pk)
    return tokens, project_ids


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
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"gunicorn did not start:\n{self.log_path.read_text()[-3000:]}")

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
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.django_db(transaction=True)
def test_submit_api_under_50_concurrent_clients(benchmark):
    import redis
    from django.conf import settings

    tokens, projects = build_world()
    queue = f"bench-submit-{uuid.uuid4().hex[:8]}"
    server = Gunicorn(queue)
    latencies: list[list[float]] = [[] for _ in range(CLIENTS)]
    statuses: list[list[int]] = [[] for _ in range(CLIENTS)]
    stop = threading.Event()

    def load(i: int) -> None:
        client = Client(server.port, tokens[i % len(tokens)], projects[i % len(projects)])
        while not stop.is_set():
            seconds, status = client.submit()
            latencies[i].append(seconds)
            statuses[i].append(status)

    # 49 clients in threads; the 50th is the benchmark's own, submitting back to back like
    # the others, so its timed rounds are representative requests under the full load.
    threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(1, CLIENTS)]
    probe_latencies: list[float] = []
    probe_statuses: list[int] = []
    try:
        began = time.monotonic()
        for thread in threads:
            thread.start()
        warmup = min(5.0, SECONDS / 6)
        time.sleep(warmup)  # every client connected and busy
        per_client_rate = sum(len(x) for x in latencies) / max(1, CLIENTS - 1) / warmup
        rounds = max(10, int(per_client_rate * (SECONDS - warmup)))
        probe = Client(server.port, tokens[0], projects[0])

        def one_submit() -> None:
            seconds, status = probe.submit()
            probe_latencies.append(seconds)
            probe_statuses.append(status)

        benchmark.pedantic(one_submit, rounds=rounds, iterations=1)
        time.sleep(max(0.0, SECONDS - (time.monotonic() - began)))
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        elapsed = time.monotonic() - began
    finally:
        stop.set()
        server.stop()
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(queue)

    every = [s for per in latencies for s in per] + probe_latencies
    codes = [c for per in statuses for c in per] + probe_statuses
    errors = sum(1 for c in codes if c != 201)
    throughput = len(every) / elapsed
    benchmark.extra_info.update(
        {
            "clients": CLIENTS,
            "duration_seconds": round(elapsed, 1),
            "requests": len(codes),
            "errors": errors,
            "p50_ms": round(statistics.median(every) * 1000, 1),
            "p95_ms": round(percentile(every, 0.95) * 1000, 1),
            "p99_ms": round(percentile(every, 0.99) * 1000, 1),
            "requests_per_second": round(throughput, 1),
            "gunicorn": f"{WORKERS} workers x {THREADS} threads",
        }
    )
    print(
        f"\nsubmit load: {CLIENTS} clients, {elapsed:.0f} s, {len(codes)} requests, "
        f"{errors} errors, {throughput:.0f} req/s (target {TARGET_PER_SECOND}), p50 {benchmark.extra_info['p50_ms']} ms, "
        f"p95 {benchmark.extra_info['p95_ms']} ms, p99 {benchmark.extra_info['p99_ms']} ms"
    )
    # Behaviour, not time: every accepted submit is a workload, each exactly once.
    assert Workload.objects.count() == sum(1 for c in codes if c == 201)


OPEN_RATE = float(os.environ.get("BENCH_SUBMIT_RATE", "50"))
OPEN_TARGET_P95 = 0.1


@pytest.mark.django_db(transaction=True)
def test_submit_api_open_loop_at_50_per_second(benchmark):
    """Submits offered at a fixed 50 per second, whether or not earlier ones have answered
    (an open loop, as independent users arrive), for ``BENCH_SUBMIT_SECONDS``.

    Each submit has its slot (start + k / rate); its latency counts from the slot, not from
    when a connection was free, so a server that falls behind shows it (no coordinated
    omission). 40 connections in threads serve the slots, each warmed first by one submit
    that is not timed (a deployed server has answered before; a cold one spends its first
    half second connecting and importing); the benchmark's own rounds are every tenth slot,
    sent by the benchmark itself, and their median is printed. The p95 of all timed submits,
    judged against 100 ms, is in extra_info and printed.
    """
    import queue as queues

    import redis
    from django.conf import settings

    tokens, projects = build_world()
    broker_queue = f"bench-submit-{uuid.uuid4().hex[:8]}"
    server = Gunicorn(broker_queue)
    slots: queues.Queue[float | None] = queues.Queue()
    lock = threading.Lock()
    latencies: list[float] = []
    codes: list[int] = []
    count = int(SECONDS * OPEN_RATE)
    senders = 40
    warmed = threading.Barrier(senders + 1, timeout=120)
    warm_codes: list[int] = []

    def record(seconds: float, status: int) -> None:
        with lock:
            latencies.append(seconds)
            codes.append(status)

    def send(i: int) -> None:
        client = Client(server.port, tokens[i % len(tokens)], projects[i % len(projects)])
        warm_codes.append(client.submit()[1])
        warmed.wait()
        while (slot := slots.get()) is not None:
            time.sleep(max(0.0, slot - time.perf_counter()))
            # From the slot: time spent waiting for a free connection counts too.
            late = max(0.0, time.perf_counter() - slot)
            seconds, status = client.submit()
            record(late + seconds, status)

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(senders)]
    probe = Client(server.port, tokens[0], projects[0])
    clock = {"slot": 0.0}

    def wait_for_slot() -> None:
        time.sleep(max(0.0, clock["slot"] - time.perf_counter()))

    def probe_submit() -> None:
        late = max(0.0, time.perf_counter() - clock["slot"])
        seconds, status = probe.submit()
        record(late + seconds, status)

    try:
        for thread in threads:
            thread.start()
        warmed.wait()
        warm_codes.append(probe.submit()[1])
        start = time.perf_counter() + 0.5
        probe_slots = []
        for k in range(count):
            slot = start + k / OPEN_RATE
            if k % 10 == 0:
                probe_slots.append(slot)
            else:
                slots.put(slot)
        for _ in threads:
            slots.put(None)

        def next_probe() -> None:
            clock["slot"] = probe_slots.pop(0)
            wait_for_slot()

        benchmark.pedantic(probe_submit, setup=next_probe, rounds=len(probe_slots), iterations=1)
        for thread in threads:
            thread.join(timeout=120)
        elapsed = time.perf_counter() - start
    finally:
        for _ in threads:
            slots.put(None)
        server.stop()
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(broker_queue)

    errors = sum(1 for c in codes if c != 201)
    p95 = percentile(latencies, 0.95)
    benchmark.extra_info.update(
        {
            "target_seconds": OPEN_TARGET_P95,
            "judged": "p95",
            "judged_seconds": p95,
            "offered_per_second": OPEN_RATE,
            "duration_seconds": round(elapsed, 1),
            "requests": len(codes),
            "errors": errors,
            "p50_ms": round(statistics.median(latencies) * 1000, 1),
            "p95_ms": round(p95 * 1000, 1),
            "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
            "gunicorn": f"{WORKERS} workers x {THREADS} threads",
        }
    )
    print(
        f"\nsubmit open loop: {OPEN_RATE:.0f}/s offered for {elapsed:.0f} s, {len(codes)} "
        f"requests, {errors} errors, p50 {benchmark.extra_info['p50_ms']} ms, p95 "
        f"{benchmark.extra_info['p95_ms']} ms (target {OPEN_TARGET_P95 * 1000:.0f} ms), p99 "
        f"{benchmark.extra_info['p99_ms']} ms"
    )
    assert Workload.objects.count() == sum(1 for c in [*codes, *warm_codes] if c == 201)
