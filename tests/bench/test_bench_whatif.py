"""Benchmark: a what-if on the demo's history — its last 14 days of real demand (the demo
organization after ``load_demo --history-days 14``) replayed twice, under today's tree and
with one program's split changed. Target: at most 10 s on the 2-core reference machine.

The workloads read from the ledger, both replays and the per-team figures are timed, as the
background task runs them (``scheduler.selectors.whatif.what_if``). Nothing here asserts on
time. Run: ``make bench BENCH=tests/bench/test_bench_whatif.py`` (``PYTEST_ARGS=--reuse-db``
keeps the demo history for a second run).
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import call_command

from governance.models import Cluster, Program
from governance.selectors.tree import node_key, shares_at
from scheduler.models import Workload
from scheduler.selectors.whatif import what_if

TARGET_SECONDS = 10.0


@pytest.fixture(scope="session")
def demo(django_db_setup, django_db_blocker):
    """The demo organization with 14 days of history (kept by ``--reuse-db``)."""
    with django_db_blocker.unblock():
        cluster = Cluster.objects.filter(organization__slug="philly", slug="h100").first()
        if cluster is None or not Workload.objects.filter(cluster=cluster).exists():
            call_command("load_demo", history_days=14, verbosity=0)
            cluster = Cluster.objects.get(organization__slug="philly", slug="h100")
        return cluster


@pytest.mark.django_db
def test_bench_what_if_14_days_of_the_demo_twice(benchmark, demo):
    # The program with the most projects gives its first project five points of its second.
    program = max(Program.objects.filter(organization=demo.organization),
                  key=lambda p: p.projects.count())  # fmt: skip
    first, second = list(program.projects.order_by("name"))[:2]
    today = shares_at(cluster=demo)
    a, b = today.get(node_key(first), Decimal(0)), today.get(node_key(second), Decimal(0))
    moved = min(Decimal(5), b)
    proposal = {node_key(first): a + moved, node_key(second): b - moved}

    result = benchmark.pedantic(
        what_if, kwargs={"cluster": demo, "proposed": proposal, "days": 14}, rounds=3,
        iterations=1,
    )  # fmt: skip

    benchmark.extra_info["target_seconds"] = TARGET_SECONDS
    benchmark.extra_info["workloads"] = result.jobs
    benchmark.extra_info["teams"] = len(result.teams)
    benchmark.extra_info["gpus"] = result.gpus
    assert result.jobs > 1000 and result.teams
