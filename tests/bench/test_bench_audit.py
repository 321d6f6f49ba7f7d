"""Benchmark: the audit trail page (``/audit/``) and its CSV export on 200,000 events.

Made once per session, into the test database: 4 organizations with 50,000 events each
(200,000 in all), spread over the year before 2026-11-01, 20 actors per organization plus the
system (~10 % of events), every action with a small before/after. The rows are inserted with
``AuditEvent.objects.bulk_create`` — new rows only, which the append-only model allows (its
``save()`` refuses updates, the trigger refuses UPDATE/DELETE; nothing here updates) — then
``VACUUM ANALYZE`` gives the planner the statistics and visibility map that autovacuum gives
an insert-only table in production.

Each round is one full page render through the Django test client — routing, session,
visibility, filter form, paginator count, the page's 50 events, template — signed in as the
org admin of one organization, who sees its 50,000 events. Target (like the dashboards):
median <= 300 ms per page. The CSV export of a filtered month (~4,100 events) is judged
against 1 s. Beside the timing, each page test EXPLAINs the page's main query (the
selector's queryset, filtered and sliced as the page does) and asserts that it reads
``governance_auditevent`` through one of the audit indexes, never a sequential scan; the
plan's index and its ``EXPLAIN ANALYZE`` execution time are printed with the median.
Nothing here asserts on time.

Run: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/gov_auditbench
make bench BENCH=tests/bench/test_bench_audit.py``.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.urls import reverse

from governance.choices import AuditAction
from governance.models import AuditEvent, Organization
from governance.selectors.audit import AuditFilter, audit_events_filter, audit_events_visible
from governance.selectors.visibility import user_visibility
from governance.views.audit import PAGE_SIZE, AuditFilterForm
from tests.factories import org_admin_of

PAGE_TARGET_SECONDS = 0.3
CSV_TARGET_SECONDS = 1.0
ORGS, EVENTS_PER_ORG, ACTORS_PER_ORG = 4, 50_000, 20
END = datetime(2026, 11, 1, tzinfo=UTC)
SPAN_SECONDS = 365 * 24 * 3600
SEED = 7
DEEP_PAGE = 500  # of 1,000: offset 24,950
AUDIT_INDEXES = ("audit_org_newest", "audit_org_action", "audit_org_actor")
INDEX_NODE = (
    r"Index (?:Only )?Scan (?:Backward )?using (\w+) on governance_auditevent"
    r"|Bitmap Index Scan on (audit_\w+)"
)
WEEK = {"since": "2026-09-07", "until": "2026-09-13"}
MONTH = {"since": "2026-10-01", "until": "2026-10-31"}


def _before_after(action: str, rng: random.Random) -> tuple[dict, dict, str, str]:
    """(before, after, object_kind, object_label) shaped like the services write them."""
    if action == AuditAction.SHARE_CHANGE:
        a = rng.randrange(10, 90)
        b = rng.randrange(10, 90)
        return (
            {"Vision": f"{a}.00", "Detection": f"{100 - a}.00"},
            {"Vision": f"{b}.00", "Detection": f"{100 - b}.00",
             "valid_from": "2026-06-01T00:00:00+00:00", "valid_to": None},
            "program",
            "Perception on h100",
        )  # fmt: skip
    if action.startswith("approval_"):
        state = action.removeprefix("approval_")
        return {"state": "submitted"}, {"state": state}, "approval_request", "Request #9"
    if action.startswith("node_"):
        states = {"node_drain": ("healthy", "draining"), "node_undrain": ("draining", "healthy"),
                  "node_down": ("healthy", "down"), "node_up": ("down", "healthy")}  # fmt: skip
        before, after = states[action]
        node = f"gpu-{rng.randrange(1, 129):03d} (h100)"
        return {"state": before}, {"state": after}, "node", node
    if action == AuditAction.RUN_PREEMPT_FORCED:
        return (
            {"state": "running", "run": rng.randrange(1, 10**6),
             "protected_until": "2026-06-01T12:00:00+00:00"},
            {"state": "preempted", "stopped_at": "2026-06-01T11:00:00+00:00"},
            "workload",
            f"train-{rng.randrange(1, 10**5)}",
        )  # fmt: skip
    return {}, {"role": "researcher", "scope": "Project Vision"}, "user", "someone"


def _make_events(org: Organization, actors: list, rng: random.Random) -> list[AuditEvent]:
    actions = list(AuditAction.values)
    events = []
    for _ in range(EVENTS_PER_ORG):
        action = rng.choice(actions)
        actor = None if rng.random() < 0.1 else rng.choice(actors)
        before, after, kind, label = _before_after(action, rng)
        events.append(
            AuditEvent(
                at=END - timedelta(seconds=rng.randrange(SPAN_SECONDS)),
                actor=actor,
                actor_label=actor.username if actor else "",
                action=action,
                organization=org,
                object_kind=kind,
                object_id=rng.randrange(1, 5_000),
                object_label=label,
                before=before,
                after=after,
                reason=rng.choice(["", "Fan failure.", "Deadline next week.", "Rebalance."]),
            )
        )
    return events


@pytest.fixture(scope="session")
def trail(django_db_setup, django_db_blocker):
    """200,000 audit events over 4 organizations, made once per session."""
    if connection.vendor != "postgresql":
        pytest.skip("the audit benchmark reads PostgreSQL plans")
    rng = random.Random(SEED)
    user_model = get_user_model()
    with django_db_blocker.unblock():
        orgs = [
            Organization.objects.create(name=f"Audit bench {i}", slug=f"audit-bench-{i}")
            for i in range(ORGS)
        ]
        for org in orgs:
            actors = user_model.objects.bulk_create(
                user_model(username=f"{org.slug}-actor-{i:02d}") for i in range(ACTORS_PER_ORG)
            )
            AuditEvent.objects.bulk_create(_make_events(org, actors, rng), batch_size=5_000)
        admin = org_admin_of(orgs[0]).user
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE governance_auditevent")
        rows = AuditEvent.objects.count()
    assert rows == ORGS * EVENTS_PER_ORG
    return {"admin": admin, "org": orgs[0], "rows": rows, "actor": f"{orgs[0].slug}-actor-03"}


@pytest.fixture
def admin_client(trail, db) -> Client:
    client = Client()
    client.force_login(trail["admin"])
    return client


def explain_page_query(trail: dict, query: dict, page: int = 1) -> tuple[str, float]:
    """The audit index the page's main query reads, and its EXPLAIN ANALYZE time (ms).

    The queryset is the page's own: the visible events, narrowed by the page's filter form,
    sliced to the page as the paginator does.
    """
    form = AuditFilterForm(query or None)
    events = audit_events_visible(visibility=user_visibility(user=trail["admin"]))
    if form.is_bound:
        assert form.is_valid(), form.errors
        events = audit_events_filter(events, query=form.query())
    offset = (page - 1) * PAGE_SIZE
    plan = events[offset : offset + PAGE_SIZE].explain(analyze=True)
    assert "Seq Scan on governance_auditevent" not in plan, plan
    used = [a or b for a, b in re.findall(INDEX_NODE, plan)]
    assert used and set(used) <= set(AUDIT_INDEXES), plan
    ms = float(re.search(r"Execution Time: ([\d.]+) ms", plan).group(1))
    return used[0], ms


def bench_page(benchmark, client, trail, query: dict, *, page: int = 1, expect_rows=PAGE_SIZE):
    """Render ``/audit/`` with ``query`` repeatedly; record the target, plan and sizes."""
    index, plan_ms = explain_page_query(trail, query, page)
    params = {**query, "page": page} if page > 1 else query
    benchmark.extra_info["target_seconds"] = PAGE_TARGET_SECONDS
    benchmark.extra_info["audit_rows"] = trail["rows"]
    benchmark.extra_info["index"] = index
    benchmark.extra_info["plan_ms"] = plan_ms
    response = benchmark.pedantic(
        client.get, args=(reverse("audit:events"), params), rounds=15, iterations=1,
        warmup_rounds=2,
    )  # fmt: skip
    assert response.status_code == 200
    page_obj = response.context["page"]
    assert page_obj.number == page
    assert response.content.decode().count('data-testid="audit-event"') == expect_rows
    benchmark.extra_info["matching"] = page_obj.paginator.count
    benchmark.extra_info["page_kb"] = round(len(response.content) / 1024, 1)
    return page_obj


@pytest.mark.django_db
def test_bench_audit_page_newest(benchmark, admin_client, trail):
    page = bench_page(benchmark, admin_client, trail, {})
    assert page.paginator.count == EVENTS_PER_ORG
    ats = [e.at for e in page.object_list]
    assert ats == sorted(ats, reverse=True)


@pytest.mark.django_db
def test_bench_audit_page_deep(benchmark, admin_client, trail):
    page = bench_page(benchmark, admin_client, trail, {}, page=DEEP_PAGE)
    assert page.paginator.num_pages == EVENTS_PER_ORG // PAGE_SIZE


@pytest.mark.django_db
def test_bench_audit_page_by_action(benchmark, admin_client, trail):
    page = bench_page(benchmark, admin_client, trail, {"action": AuditAction.NODE_DRAIN.value})
    assert {e.action for e in page.object_list} == {AuditAction.NODE_DRAIN}


@pytest.mark.django_db
def test_bench_audit_page_by_actor(benchmark, admin_client, trail):
    page = bench_page(benchmark, admin_client, trail, {"actor": trail["actor"]})
    assert {e.actor_label for e in page.object_list} == {trail["actor"]}


@pytest.mark.django_db
def test_bench_audit_page_one_week(benchmark, admin_client, trail):
    page = bench_page(benchmark, admin_client, trail, WEEK)
    assert 500 < page.paginator.count < 1_500  # about 50,000 * 7 / 365


@pytest.mark.django_db
def test_bench_audit_csv_one_month(benchmark, admin_client, trail):
    benchmark.extra_info["target_seconds"] = CSV_TARGET_SECONDS
    benchmark.extra_info["audit_rows"] = trail["rows"]
    response = benchmark.pedantic(
        admin_client.get, args=(reverse("audit:export"), MONTH), rounds=7, iterations=1,
        warmup_rounds=1,
    )  # fmt: skip
    assert response.status_code == 200
    lines = response.content.decode().splitlines()
    month = AuditFilter(since=date(2026, 10, 1), until=date(2026, 10, 31))
    expected = audit_events_filter(AuditEvent.objects.filter(organization=trail["org"]),
                                   query=month).count()  # fmt: skip
    assert len(lines) - 1 == expected > 3_000
    benchmark.extra_info["csv_rows"] = len(lines) - 1
    benchmark.extra_info["csv_kb"] = round(len(response.content) / 1024, 1)
