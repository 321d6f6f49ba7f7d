"""Benchmark: the OpenAPI schema as the API docs page fetches it on every visit.

Each round is one ``GET /api/schema/`` through the Django test client asking for JSON, as
Swagger UI does: routing, content negotiation and the answer. The first build of the process
is made before the rounds, so they measure what every later visit pays: the kept bytes
(``governance/api/schema_view.py``), against drf-spectacular's own view, which builds and
renders the schema every time (the second benchmark, no target: the comparison). Target of
the first: median <= 50 ms.
Nothing here asserts on time.

Run: ``make bench BENCH=tests/bench/test_bench_api_schema.py``.
"""

from __future__ import annotations

import pytest
from django.test import Client
from drf_spectacular.views import SpectacularAPIView
from rest_framework.test import APIRequestFactory

TARGET_SECONDS = 0.05
ACCEPT = "application/json,*/*"

pytestmark = pytest.mark.django_db


def test_bench_api_schema_kept(benchmark):
    client = Client()
    first = client.get("/api/schema/", HTTP_ACCEPT=ACCEPT)
    assert first.status_code == 200

    def fetch():
        return client.get("/api/schema/", HTTP_ACCEPT=ACCEPT)

    benchmark.extra_info["target_seconds"] = TARGET_SECONDS
    answer = benchmark.pedantic(fetch, rounds=21, iterations=1, warmup_rounds=1)
    assert answer.content == first.content


def test_bench_api_schema_built_each_time(benchmark):
    view = SpectacularAPIView.as_view()
    factory = APIRequestFactory()

    def fetch():
        return view(factory.get("/api/schema/", HTTP_ACCEPT=ACCEPT)).render()

    fetch()  # the process's first build, as above
    # No target: this is what the kept bytes are compared with.
    answer = benchmark.pedantic(fetch, rounds=21, iterations=1, warmup_rounds=1)
    assert answer.status_code == 200
