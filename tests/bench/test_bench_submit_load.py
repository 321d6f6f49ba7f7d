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

import os
import queue as queues
import statistics
import threading
import time
import uuid

import pytest
from rest_framework.authtoken.models import Token

from governance.models import Allocation, Cluster, Organization, Program, Project
from scheduler.models import Workload
from tests.bench.served import THREADS, WORKERS, Client, Gunicorn, percentile
from tests.factories import UserFactory, researcher_of

CLIENTS = int(os.environ.get("BENCH_SUBMIT_CLIENTS", "50"))
SECONDS = float(os.environ.get("BENCH_SUBMIT_SECONDS", "60"))
TARGET_PER_SECOND = 150


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


class OpenLoop:
    """Submits offered at fixed slots (an open loop) by ``senders`` threads, each on its own
    warmed keep-alive connection, and by the benchmark's probe on every tenth slot.

    A submit's latency counts from its slot, not from when a connection was free: time spent
    waiting for a free connection counts too.
    """

    def __init__(self, port: int, tokens: list[str], projects: list[int], senders: int = 40):
        self.port, self.tokens, self.projects = port, tokens, projects
        self.slots: queues.Queue[float | None] = queues.Queue()
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.codes: list[int] = []
        self.warm_codes: list[int] = []
        self.warmed = threading.Barrier(senders + 1, timeout=120)
        self.threads = [
            threading.Thread(target=self._send, args=(i,), daemon=True) for i in range(senders)
        ]
        self.probe = Client(port, tokens[0], projects[0])
        self.probe_slot = 0.0

    def record(self, seconds: float, status: int) -> None:
        """One timed submit."""
        with self.lock:
            self.latencies.append(seconds)
            self.codes.append(status)

    def _send(self, i: int) -> None:
        client = Client(
            self.port, self.tokens[i % len(self.tokens)], self.projects[i % len(self.projects)]
        )
        self.warm_codes.append(client.submit()[1])
        self.warmed.wait()
        while (slot := self.slots.get()) is not None:
            time.sleep(max(0.0, slot - time.perf_counter()))
            # From the slot: time spent waiting for a free connection counts too.
            late = max(0.0, time.perf_counter() - slot)
            seconds, status = client.submit()
            self.record(late + seconds, status)

    def start(self) -> None:
        """Start the senders and wait until every connection, the probe's too, is warm."""
        for thread in self.threads:
            thread.start()
        self.warmed.wait()
        self.warm_codes.append(self.probe.submit()[1])

    def offer(self, count: int) -> tuple[float, list[float]]:
        """Plan ``count`` slots from half a second from now: the senders' go to their queue
        (then one end mark per sender); the start and the probe's slots (every tenth)."""
        start = time.perf_counter() + 0.5
        probe_slots = []
        for k in range(count):
            slot = start + k / OPEN_RATE
            if k % 10 == 0:
                probe_slots.append(slot)
            else:
                self.slots.put(slot)
        self.release()
        return start, probe_slots

    def wait_for_probe_slot(self, probe_slots: list[float]) -> None:
        """The benchmark's setup: sleep until the probe's next slot."""
        self.probe_slot = probe_slots.pop(0)
        time.sleep(max(0.0, self.probe_slot - time.perf_counter()))

    def probe_submit(self) -> None:
        """The benchmark's round: one submit by the probe, timed from its slot."""
        late = max(0.0, time.perf_counter() - self.probe_slot)
        seconds, status = self.probe.submit()
        self.record(late + seconds, status)

    def join(self) -> None:
        """Wait for the senders to finish their slots."""
        for thread in self.threads:
            thread.join(timeout=120)

    def release(self) -> None:
        """One end mark per sender: each stops once the slots before it are sent."""
        for _ in self.threads:
            self.slots.put(None)


def report_open_loop(benchmark, loop: OpenLoop, elapsed: float) -> None:
    """The open loop's figures in ``extra_info``, and printed."""
    latencies, codes = loop.latencies, loop.codes
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
    import redis
    from django.conf import settings

    tokens, projects = build_world()
    broker_queue = f"bench-submit-{uuid.uuid4().hex[:8]}"
    server = Gunicorn(broker_queue)
    loop = OpenLoop(server.port, tokens, projects)
    try:
        loop.start()
        start, probe_slots = loop.offer(int(SECONDS * OPEN_RATE))
        benchmark.pedantic(
            loop.probe_submit,
            setup=lambda: loop.wait_for_probe_slot(probe_slots),
            rounds=len(probe_slots),
            iterations=1,
        )
        loop.join()
        elapsed = time.perf_counter() - start
    finally:
        loop.release()
        server.stop()
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(broker_queue)

    report_open_loop(benchmark, loop, elapsed)
    codes, warm_codes = loop.codes, loop.warm_codes
    assert Workload.objects.count() == sum(1 for c in [*codes, *warm_codes] if c == 201)
