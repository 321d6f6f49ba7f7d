"""``manage.py kai_import_usage`` against a local server that speaks Prometheus' query_range API.

The server (a thread on 127.0.0.1, started by the fixture) answers ``/api/v1/query_range``
in Prometheus' documented JSON format, with samples at ``start + k x step`` up to ``end``
taken from per-queue timelines, so the import's own chunking and step handling are exercised.
"""

from __future__ import annotations

import json
import socket
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from scheduler.adapters.kai import prometheus
from scheduler.adapters.kai.usage import Piece, allocation_pieces, kai_usage_import
from scheduler.models import EntitlementRecord, UsageRecord

pytestmark = pytest.mark.django_db


class FakePrometheus:
    """Timelines per queue label: a function of the sample instant returning a value string."""

    def __init__(self) -> None:
        self.timelines: dict[str, object] = {}
        self.demand: dict[str, object] = {}  # answered for any query but the allocation one
        self.requests: list[dict] = []
        self.error: tuple[int, dict] | None = None

    def answer(self, params: dict) -> tuple[int, dict]:
        self.requests.append(params)
        if self.error:
            return self.error
        start, end = float(params["start"]), float(params["end"])
        step = int(params["step"].rstrip("s"))
        result = []
        timelines = self.timelines if "kai_queue_allocated_gpus" in params["query"] else self.demand
        for queue, timeline in sorted(timelines.items()):
            values = []
            t = start
            while t <= end:
                value = timeline(datetime.fromtimestamp(t, tz=UTC))
                if value is not None:
                    values.append([t, value])
                t += step
            if values:
                result.append({"metric": {"queue_name": queue}, "values": values})
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.fixture
def fake_prometheus():
    fake = FakePrometheus()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlsplit(self.path)
            if url.path != "/api/v1/query_range":
                self.send_error(404)
                return
            params = {k: v[0] for k, v in parse_qs(url.query).items()}
            status, body = fake.answer(params)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()
    server.server_close()


def hour_ago(hours: int) -> datetime:
    return timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(
        hours=hours
    )


def two_hours_of_traffic(fake: FakePrometheus, t0: datetime) -> None:
    """The personas' cluster (32 GPUs) over [t0, t0 + 2 h)."""
    t1, t2 = t0 + timedelta(hours=1), t0 + timedelta(hours=2)
    # Detection (30 % → 9.6 GPUs/h cap): 2 GPUs throughout.
    fake.timelines["h100-vision-detection"] = lambda t: "2" if t0 <= t < t2 else None
    # Summaries (12 % → 3.84 GPUs/h cap): 5 GPUs in the first hour, then none.
    fake.timelines["h100-language-summaries"] = lambda t: "5" if t0 <= t < t1 else "0"
    # Segmentation: half a GPU (KAI GPU sharing) for the first 30 minutes of the second hour.
    fake.timelines["h100-vision-segmentation"] = lambda t: (
        "0.5" if t1 <= t < t1 + timedelta(minutes=30) else "0"
    )
    # Translation: Prometheus has no number for it.
    fake.timelines["h100-language-translation"] = lambda t: "NaN"
    # A parent queue (includes its children) and a queue outside the tree.
    fake.timelines["h100-vision"] = lambda t: "2.5"
    fake.timelines["default-queue"] = lambda t: "1"


def ledger(project) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = {}
    for row in UsageRecord.objects.filter(source="kai", project=project):
        totals[row.charge] = totals.get(row.charge, Decimal(0)) + row.gpu_seconds
    return totals


def run(*args) -> str:
    out = StringIO()
    call_command("kai_import_usage", *args, stdout=out)
    return out.getvalue()


def test_import_charges_each_project_queue_and_reports_the_rest(personas, fake_prometheus):
    t0 = hour_ago(3)
    two_hours_of_traffic(fake_prometheus, t0)
    out = run(
        "--cluster",
        "h100",
        "--prometheus",
        fake_prometheus.url,
        "--since",
        t0.isoformat(),
        "--until",
        (t0 + timedelta(hours=2)).isoformat(),
    )
    # 2 GPUs x 7200 s, all within the cap.
    assert ledger(personas.project_a1) == {"budgeted": Decimal(14_400)}
    # 5 GPUs x 3600 s against a cap of 3.84 GPUs x 3600 s = 13,824; the rest is burst.
    assert ledger(personas.project_b2) == {"budgeted": Decimal(13_824), "burst": Decimal(4_176)}
    # 0.5 GPU x 1800 s = 900 GPU-seconds.
    assert ledger(personas.project_a2) == {"budgeted": Decimal(900)}
    assert ledger(personas.project_b1) == {}
    assert not UsageRecord.objects.filter(source="kai", external_id__startswith="default").exists()
    assert "not charged: queue 'default-queue'" in out and "(2.000 GPU-hours seen)" in out
    assert "h100-vision:" not in out  # the parent queue is neither charged nor "unknown"
    # 14,400 + 18,000 + 900 GPU-s = 9.25 GPU-hours.
    assert "9.250 GPU-hours charged" in out
    # The query collapses controller replicas to one series per queue.
    assert fake_prometheus.requests[0]["query"] == "max by (queue_name) (kai_queue_allocated_gpus)"


def test_a_second_import_of_the_same_hours_charges_nothing(personas, fake_prometheus):
    t0 = hour_ago(3)
    two_hours_of_traffic(fake_prometheus, t0)
    args = (
        "--cluster",
        "h100",
        "--prometheus",
        fake_prometheus.url,
        "--since",
        t0.isoformat(),
        "--until",
        (t0 + timedelta(hours=2)).isoformat(),
    )
    run(*args)
    rows = UsageRecord.objects.filter(source="kai").count()
    out = run(*args)
    assert UsageRecord.objects.filter(source="kai").count() == rows
    assert "0.000 GPU-hours charged in 0 ledger rows" in out
    # Overlapping windows are safe too: only the new hour is charged.
    fake_prometheus.timelines["h100-vision-detection"] = lambda t: "2"
    run(
        "--cluster",
        "h100",
        "--prometheus",
        fake_prometheus.url,
        "--since",
        t0.isoformat(),
        "--until",
        (t0 + timedelta(hours=3)).isoformat(),
    )
    assert ledger(personas.project_a1) == {"budgeted": Decimal(3 * 7_200)}


def test_demand_query_records_entitlement_and_demand_so_owed_works(personas, fake_prometheus):
    t0 = hour_ago(3)
    two_hours_of_traffic(fake_prometheus, t0)
    # Detection asks for 4 GPUs (2 run, 2 wait) for both hours; Summaries for 1 GPU.
    fake_prometheus.demand["h100-vision-detection"] = lambda t: "4"
    fake_prometheus.demand["h100-language-summaries"] = lambda t: "1"
    fake_prometheus.demand["default-queue"] = lambda t: "7"
    args = (
        "--cluster",
        "h100",
        "--prometheus",
        fake_prometheus.url,
        "--since",
        t0.isoformat(),
        "--until",
        (t0 + timedelta(hours=2)).isoformat(),
        "--demand-query",
        'sum by (queue_name) (my_gpu_requests{phase=~"Pending|Running"})',
    )
    out = run(*args)
    rows = EntitlementRecord.objects.filter(cluster=personas.cluster)
    # Four budgeted projects x two hours.
    assert rows.count() == 8 and "entitlement and demand: 8 rows" in out
    detection = rows.filter(project=personas.project_a1).order_by("interval_start")
    assert [r.interval_start for r in detection] == [t0, t0 + timedelta(hours=1)]
    # Entitled 30 % x 32 GPUs x 3600 s = 34,560; demand 4 GPUs x 3600 s = 14,400.
    assert [(r.entitled_gpu_seconds, r.demand_gpu_seconds) for r in detection] == [
        (Decimal(34_560), Decimal(14_400))
    ] * 2
    summaries = rows.filter(project=personas.project_b2)
    assert {r.demand_gpu_seconds for r in summaries} == {Decimal(3_600)}
    assert fake_prometheus.requests[-1]["query"].startswith("sum by (queue_name)")
    # Re-running writes no entitlement twice.
    run(*args)
    assert EntitlementRecord.objects.filter(cluster=personas.cluster).count() == 8


def test_long_ranges_are_fetched_in_chunks_with_no_sample_twice(
    personas, fake_prometheus, monkeypatch
):
    monkeypatch.setattr(prometheus, "MAX_POINTS", 50)
    t0 = hour_ago(3)
    two_hours_of_traffic(fake_prometheus, t0)
    result = kai_usage_import(
        cluster=personas.cluster,
        prometheus_url=fake_prometheus.url,
        since=t0,
        until=t0 + timedelta(hours=2),
    )
    assert len(fake_prometheus.requests) == 3  # 120 samples in chunks of 50
    assert result.charged["h100-vision-detection"] == Decimal(14_400)
    assert result.unknown == {"default-queue": Decimal(7_200)}


def test_unreachable_prometheus_is_named_and_charges_nothing(personas):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(CommandError, match=rf"--prometheus: http://127.0.0.1:{port}: cannot reach"):
        run("--cluster", "h100", "--prometheus", f"http://127.0.0.1:{port}", "--since", "3h")
    assert not UsageRecord.objects.exists()


def test_prometheus_error_answer_is_shown(personas, fake_prometheus):
    fake_prometheus.error = (
        400,
        {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"},
    )
    with pytest.raises(CommandError, match="HTTP 400: parse error at char 5"):
        run("--cluster", "h100", "--prometheus", fake_prometheus.url, "--since", "3h")
    assert not UsageRecord.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "yesterday"), "--since: 'yesterday' is neither"),
        (("--since", "3h", "--step", "7"), "--step: 7 s must divide the hour"),
        (("--since", "10m"), "--since: .* is neither"),
        (("--since", "1h", "--until", "2d"), "--since: .* leaves no whole hour"),
        (("--since", "3h", "--until", "2999-01-01T00:00Z"), "--until: .* is in the future"),
        (("--since", "3h", "--prometheus", "file:///etc/passwd"), "not an http"),
    ],
)
def test_bad_input_is_named_and_charges_nothing(personas, fake_prometheus, args, message):
    base = ["--cluster", "h100", "--prometheus", fake_prometheus.url]
    if "--prometheus" in args:
        base = ["--cluster", "h100"]
    with pytest.raises(CommandError, match=message):
        run(*base, *args)
    assert not UsageRecord.objects.exists()


def test_unknown_cluster_is_named(fake_prometheus):
    with pytest.raises(CommandError, match="--cluster: no cluster 'gone'"):
        run("--cluster", "gone", "--prometheus", fake_prometheus.url, "--since", "3h")


def test_pieces_merge_equal_samples_and_shorten_fractions():
    t0 = datetime(2026, 3, 2, 10, tzinfo=UTC)
    samples = [
        (t0 + timedelta(minutes=m), Decimal(v))
        for m, v in [(0, "2"), (1, "2"), (2, "0"), (3, "1.5"), (59, "3"), (60, "3")]
    ]
    pieces = allocation_pieces(samples, step_seconds=60, since=t0, until=t0 + timedelta(hours=2))
    assert pieces == {
        t0: [
            Piece(t0, t0 + timedelta(minutes=2), 2),
            # 1.5 GPUs for 60 s = 90 GPU-s = 2 GPUs for 45 s.
            Piece(t0 + timedelta(minutes=3), t0 + timedelta(minutes=3, seconds=45), 2),
            Piece(t0 + timedelta(minutes=59), t0 + timedelta(minutes=60), 3),
        ],
        t0 + timedelta(hours=1): [
            Piece(t0 + timedelta(hours=1), t0 + timedelta(hours=1, minutes=1), 3)
        ],
    }
