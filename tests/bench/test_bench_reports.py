"""Benchmarks: the finance usage report on a year of hourly usage (300 projects, 2 clusters).

The data (5.3 M hourly rollup rows and their ledgers) is made once per session by
``manage.py generate_usage_history`` into the test database — a few minutes on two cores.
Target: the XLSX export of a year <= 5 s (the report's page is measured served, with the
dashboards: ``test_bench_dashboards.py``). The dashboards' selector for a month is measured
beside it. Nothing here asserts on time: benchmarks measure, tests judge behaviour.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.test import Client

from governance.models import Cluster, Organization
from governance.selectors.usage import usage_by_tree_node
from governance.selectors.visibility import user_visibility

SEED, END = 1, "2026-11-01"
SLUG = f"usage-history-{SEED}"


@pytest.fixture(scope="session")
def usage_history(django_db_setup, django_db_blocker):
    """One year of usage for 300 projects on 2 clusters, generated once per session."""
    with django_db_blocker.unblock():
        if not Organization.objects.filter(slug=SLUG).exists():
            call_command(
                "generate_usage_history",
                projects=300,
                clusters=2,
                days=365,
                seed=SEED,
                end=END,
                stdout=open("/dev/null", "w"),  # noqa: SIM115
            )
    return SLUG


@pytest.fixture
def finance_client(usage_history, db, settings):
    from django.contrib.auth import get_user_model

    settings.DEBUG = False
    client = Client()
    client.force_login(get_user_model().objects.get(username=f"{usage_history}-finance"))
    return client


def test_bench_report_xlsx_one_year(benchmark, finance_client):
    def export():
        return finance_client.get(
            "/reports/usage.xlsx", {"start": "2025-11-01", "end": "2026-10-31"}
        )

    benchmark.extra_info["target_seconds"] = 5.0
    response = benchmark.pedantic(export, rounds=3, iterations=1, warmup_rounds=1)
    assert response.status_code == 200
    benchmark.extra_info.update(xlsx_bytes=len(response.content), hourly_rows_read=5_256_000)
    assert response.content[:2] == b"PK"


def test_bench_usage_by_tree_node_one_month(benchmark, usage_history, db):
    from django.contrib.auth import get_user_model

    visibility = user_visibility(user=get_user_model().objects.get(username=f"{SLUG}-finance"))
    cluster = Cluster.objects.get(organization__slug=SLUG, slug="h100")

    def rows():
        return usage_by_tree_node(
            visibility=visibility,
            cluster=cluster,
            start=datetime(2026, 10, 1, tzinfo=UTC),
            end=datetime(2026, 11, 1, tzinfo=UTC),
        )

    benchmark.extra_info["target_seconds"] = 0.3
    result = benchmark.pedantic(rows, rounds=7, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(nodes=len(result))
    assert len(result) == 1 + 15 + 300
