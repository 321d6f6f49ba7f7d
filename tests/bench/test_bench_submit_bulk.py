"""Benchmark: a sweep of 1,000 workloads in one ``POST /api/workloads/bulk/`` (validation,
one transaction, the answer), through the API with a real token against PostgreSQL.
Target: median <= 1 s on the 2-core reference machine. Nothing here asserts on time.

Run: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/gov_bulkbench
make bench BENCH=tests/bench/test_bench_submit_bulk.py``.
"""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler.models import Workload
from scheduler.services.workloads import MAX_BULK_WORKLOADS
from tests.personas import build_personas

TARGET_SECONDS = 1.0


@pytest.mark.django_db
def test_bench_bulk_submit_1000_workloads(benchmark):
    p = build_personas()
    token, _ = Token.objects.get_or_create(user=p.researcher)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = {
        "workloads": [
            {
                "project": p.project_a1.pk,
                "name": f"sweep lr={i / 10_000:.4f}",
                "gpus": 1,
                "min_runtime_seconds": 900,
                "launch_spec": {"command": ["python", "train.py", "--lr", f"{i / 10_000:.4f}"]},
            }
            for i in range(MAX_BULK_WORKLOADS)
        ]
    }

    def submit():
        response = client.post("/api/workloads/bulk/", body, format="json")
        assert response.status_code == 201
        return response

    benchmark.extra_info["target_seconds"] = TARGET_SECONDS
    benchmark.extra_info["workloads_per_call"] = MAX_BULK_WORKLOADS
    benchmark.pedantic(submit, rounds=7, iterations=1)
    # Its own project's: other benchmarks of the session may have kept workloads of theirs.
    assert Workload.objects.filter(project=p.project_a1).count() == 7 * MAX_BULK_WORKLOADS
