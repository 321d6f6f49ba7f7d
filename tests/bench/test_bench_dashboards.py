"""Benchmark: each manager/PI dashboard page on a year of hourly rollups.

``manage.py generate_usage_history --projects 300 --clusters 2 --days 365 --no-ledger
--until-now`` runs once per session (5.3 M ``UsageHour`` rows; the dashboards read only the
rollup, so the ledger is left out to save minutes), ending at the hour it runs: a live
cluster whose accounting is current, with today's hours so far in it. Each round is one GET of the page from gunicorn, served
as deployed (``governance/gunicorn_conf.py``, ``DEBUG=false``) on the test database, over one
keep-alive connection as a browser — URL routing, session, visibility, selectors, figures,
template — signed in as the generated org admin, who sees all 300 projects; the page is then
rendered once in-process for the checks on its context. Target: median <= 300 ms per page.

The node agents' GPU telemetry is added to that world (``telemetry_world``: seven projects in
ten measured, one ``UtilizationHour`` row per run and hour with usage, about two million
rows; ten open runs marked idle), so the pages' utilization figures are read at that volume.
Nothing here asserts on time; the responses are checked for content.

The usage report's page is measured here too, served the same way on the same year (last
month, per project: 600 rows); ``test_bench_reports.py`` times its downloads.

Run: ``make bench BENCH=tests/bench/test_bench_dashboards.py``. With ``PYTEST_ARGS=--reuse-db``
the data stays in the test database, and a second run measures without rebuilding it (how
the pages are measured beside ``make load``: docs/benchmarks.md). Each page's p95 over
``BENCH_DASHBOARD_ROUNDS`` (40) rounds is recorded too.
"""

from __future__ import annotations

import http.client
import math
import os
import uuid
from datetime import UTC, timedelta
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from governance.models import Cluster, Organization, Project
from scheduler.models import Run, UsageHour
from tests.bench.telemetry_world import TELEMETRY_SHARE, telemetry_add

TARGET_SECONDS = 0.3
PROJECTS, CLUSTERS, DAYS = 300, 2, 365
SEED = 21
SLUG = f"usage-history-{SEED}"
ROUNDS = int(os.environ.get("BENCH_DASHBOARD_ROUNDS", "40"))


def p95(benchmark) -> float:
    """The 95th percentile of the rounds' times (nearest rank)."""
    times = sorted(benchmark.stats.stats.data)
    return times[max(0, math.ceil(0.95 * len(times)) - 1)]


@pytest.fixture(scope="session")
def history(django_db_setup, django_db_blocker):
    """A year of hourly usage for 300 projects on 2 clusters, made once per session."""
    if connection.vendor != "postgresql":
        pytest.skip("the usage history generator needs PostgreSQL")
    with django_db_blocker.unblock():
        # Kept by ``--reuse-db``: measure again (beside the load harness) without rebuilding.
        if not Organization.objects.filter(slug=SLUG).exists():
            call_command(
                "generate_usage_history",
                projects=PROJECTS,
                clusters=CLUSTERS,
                days=DAYS,
                seed=SEED,
                until_now=True,
                no_ledger=True,
                verbosity=0,
            )
        # The agents' GPU telemetry, added to a world made before it existed too.
        telemetry_rows = telemetry_add(organization_slug=SLUG)
        admin = get_user_model().objects.get(username=f"{SLUG}-admin")
        rows = UsageHour.objects.count()
    return {"admin": admin, "rows": rows, "telemetry_rows": telemetry_rows}


@pytest.fixture
def admin_client(history, db) -> Client:
    client = Client()
    client.force_login(history["admin"])
    return client


@pytest.fixture(scope="session")
def served(history, django_db_blocker):
    """gunicorn with the served configuration on the test database, and the session cookie
    of the org admin signed in (made with gunicorn's secret key, committed so it sees it)."""
    from tests.bench.served import Gunicorn

    key = "bench-" + uuid.uuid4().hex * 2
    with django_db_blocker.unblock(), override_settings(SECRET_KEY=key):
        signed_in = Client()
        signed_in.force_login(history["admin"])
        cookie = signed_in.cookies[settings.SESSION_COOKIE_NAME].value
    server = Gunicorn(f"bench-dashboards-{uuid.uuid4().hex[:8]}", secret_key=key)
    yield {"port": server.port, "cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
    server.stop()


def bench_page(benchmark, served, client, url: str, query: dict, history: dict, must_contain: str):
    """Time ``url`` with ``query`` served by gunicorn (one keep-alive connection, as a
    browser), then render it once in-process for the checks on its context."""
    benchmark.extra_info["target_seconds"] = TARGET_SECONDS
    benchmark.extra_info["usage_hour_rows"] = history["rows"]
    benchmark.extra_info["utilization_hour_rows"] = history["telemetry_rows"]
    benchmark.extra_info["projects"] = Project.objects.count()
    connection_ = http.client.HTTPConnection("127.0.0.1", served["port"], timeout=60)
    path = f"{url}?{urlencode(query)}" if query else url
    headers = {"Cookie": served["cookie"], "Host": "127.0.0.1"}

    def get() -> tuple[int, bytes]:
        connection_.request("GET", path, headers=headers)
        answer = connection_.getresponse()
        return answer.status, answer.read()

    status, body = benchmark.pedantic(get, rounds=ROUNDS, iterations=1, warmup_rounds=2)
    connection_.close()
    benchmark.extra_info["p95_ms"] = round(p95(benchmark) * 1000, 1)
    assert status == 200, body[:500]
    assert must_contain in body.decode()
    benchmark.extra_info["page_kb"] = round(len(body) / 1024, 1)
    response = client.get(url, query)
    assert response.status_code == 200
    return response


@pytest.mark.django_db
def test_bench_owed_vs_delivered_last_7_days(benchmark, served, admin_client, history):
    response = bench_page(
        benchmark,
        served,
        admin_client,
        reverse("dashboards:delivery"),
        {},
        history,
        "Owed vs delivered",
    )
    lines = response.context["lines"]
    assert len(lines) == 1 + 15 + PROJECTS
    # Seven projects in ten have telemetry: their idle GPU-hours are shown, the rest say so.
    measured = [line for line in lines if line.row.kind == "project" and line.telemetry]
    assert len(measured) == sum(
        1
        for p in Project.objects.filter(program__organization__slug=SLUG)
        if p.pk % 10 < TELEMETRY_SHARE
    )


@pytest.mark.django_db
def test_bench_owed_vs_delivered_last_month_one_program(benchmark, served, admin_client, history):
    program = Project.objects.filter(program__organization__slug=SLUG).order_by("id")[0].program
    query = {"period": "last_month", "node": f"program-{program.pk}"}
    response = bench_page(
        benchmark,
        served,
        admin_client,
        reverse("dashboards:delivery"),
        query,
        history,
        program.name,
    )
    assert len(response.context["teams"]) == 20


@pytest.mark.django_db
def test_bench_fairshare_ranking_14_days(benchmark, served, admin_client, history):
    response = bench_page(
        benchmark,
        served,
        admin_client,
        reverse("dashboards:fairshare"),
        {},
        history,
        "Usage ÷ share",
    )
    assert len(response.context["view"].project_order) == PROJECTS


@pytest.mark.django_db
def test_bench_cluster_health_last_30_days(benchmark, served, admin_client, history):
    cluster = Cluster.objects.filter(organization__slug=SLUG).order_by("name")[0]
    response = bench_page(
        benchmark,
        served,
        admin_client,
        reverse("dashboards:health"),
        {"cluster": cluster.pk},
        history,
        "The pyramid per day",
    )
    assert len(response.context["report"].days) == 30
    use = response.context["use"]
    assert use.has_telemetry and len(use.days) == 30
    open_idle = Run.objects.filter(cluster=cluster, idle_since__isnull=False, ended_at=None)
    assert len(use.idle_runs) == open_idle.count() > 0
    assert 0 < use.total.coverage < 1 and use.total.utilization <= 1


@pytest.mark.django_db
def test_bench_usage_report_last_month(benchmark, served, admin_client, history):
    today = timezone.now().astimezone(UTC).date()
    month = (today.replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
    response = bench_page(
        benchmark,
        served,
        admin_client,
        reverse("reports:usage"),
        {"period": "month", "month": month, "level": "project"},
        history,
        f"GPU usage {month}",
    )
    report = response.context["report"]
    organization = Organization.objects.get(slug=SLUG)
    assert {row.organization for row in report.rows} == {organization.name}
    assert len(report.rows) == PROJECTS * CLUSTERS
    assert {row.idle_gpu_seconds is not None for row in report.rows} == {True, False}
