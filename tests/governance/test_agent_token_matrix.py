"""What the permission matrix lacks: agent tokens on every route, and "finance never writes".

Both walk the same generated list of routes as ``test_permission_matrix.py`` (the URL
configuration, minus its ``SKIPPED`` prefixes) and reuse its world and its ``DECISIONS``, so a
new route is covered here the moment it gets its decision there.

- An agent token (``node_agent_create``) is accepted by the node agent endpoints
  (``api:agent-*``) and nowhere else: every other API route answers 401/403 (or, for the
  sign-in endpoint ``api:token``, a refusal or what an anonymous caller gets: the token
  names no user), and every page sends the caller to sign in (pages read sessions, not tokens).
- Another agent's orders and runs are 404: ``tests/scheduler/agent_endpoints/test_api_agents_orders.py``
  (``test_another_agents_orders_and_runs_are_404``).
- Finance never writes: derived from the matrix, finance's POST on any route, own or
  cross-tenant, is never a success (2xx) or a redirect after a write (302).
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from scheduler.services.executor_reports import node_agent_create, node_register
from tests.governance import test_permission_matrix as matrix
from tests.governance.test_permission_matrix import (
    COLUMNS,
    DECISIONS,
    ROUTES,
    SAME_AS_GET,
    _call,
    _expected_post,
    outcome,
)

pytestmark = pytest.mark.django_db

# The matrix's world (personas, a foreign organization, requests, workloads, nodes).
fast_password_hasher = matrix.fast_password_hasher
world = matrix.world

# Routes that read credentials nobody has to hold: the agent gets what anonymous gets.
OPEN_TO_ANONYMOUS = {
    "api:token": "sign-in: trades a username and password for a user token",
    "notifications-unsubscribe": "a mail's signed stop link works without a session",
}


@pytest.fixture
def agent_client(world):
    """A client holding a registered node agent's token for the personas' cluster."""
    agent, raw = node_agent_create(cluster=world.p.cluster, name="matrix-agent")
    node_register(agent=agent, gpus=8)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    return client


def _url(name: str, world) -> str:
    decision = DECISIONS[name]
    return reverse(name, kwargs=decision.url(world) if decision.url else None)


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_an_agent_token_works_only_on_agent_routes(name, world, agent_client):
    assert name in DECISIONS, (
        f"{name}: give it a decision in permission_matrix/decisions_api.py or decisions_pages.py"
    )
    url = _url(name, world)
    is_api = name.startswith("api:")
    anonymous = APIClient()
    for method in ("GET", "POST"):
        got = outcome(_call(agent_client, method, url, {}, is_api))
        if name.startswith("api:agent-"):
            # Past authentication: a 405 for GET, a validation or lookup answer for POST.
            assert got not in {"401", "403"}, f"{method} {url}: the agent was refused ({got})"
        elif name in OPEN_TO_ANONYMOUS:
            # Refused outright (the token is no user's), or treated as a visitor would be.
            want = {"401", "403", outcome(_call(anonymous, method, url, {}, is_api))}
            assert got in want, f"{method} {url} as an agent: {got}, want one of {want}"
        elif is_api:
            assert got in {"401", "403"}, f"{method} {url} accepted an agent token: {got}"
        else:
            assert got == "login", f"{method} {url} as an agent: {got}, want the sign-in page"


def test_the_agent_routes_are_the_ones_the_node_agent_uses():
    agent_routes = sorted(name for name in ROUTES if name.startswith("api:agent-"))
    assert agent_routes == [
        "api:agent-heartbeat",
        "api:agent-order-ack",
        "api:agent-orders-fetch",
        "api:agent-register",
        "api:agent-run-exit",
        "api:agent-utilization",  # scheduler.agent.client.AgentClient.report_utilization
    ]


# --- Finance never writes ----------------------------------------------------------------------

FINANCE = COLUMNS.index("finance")
WRITES = {"200", "201", "302"}
# POSTs finance may make that change no budget, workload or node: each with the reason.
FINANCE_MAY_POST = {
    "api:token": "signing in: finance gets a token for itself, which changes nothing it governs",
    "api:notification-read-all": "marking its own notifications read changes nothing it governs",
    "notifications-read": "marking its own notifications read changes nothing it governs",
    "notification-open": "opening a notification marks only the reader's own one read",
    "notification-preferences": "its own e-mail choices, nothing it governs",
    "notifications-unsubscribe": "a mail's signed stop link changes only its owner's e-mail choice",
}


def _finance_post_outcomes(name: str) -> list[tuple[str, str]]:
    """Finance's POST outcomes on route ``name`` (own and cross-tenant), as the matrix declares."""
    decision = DECISIONS[name]
    found = [("own", _expected_post(decision.post, decision.get).split()[FINANCE])]
    if decision.other or decision.payload_other:
        post_other = decision.post if decision.post in (None, SAME_AS_GET) else decision.post_other
        get_other = decision.get_other or decision.get
        found.append(("other", _expected_post(post_other, get_other).split()[FINANCE]))
    return found


@pytest.mark.parametrize("name", sorted(DECISIONS))
def test_finance_never_writes(name):
    for variant, got in _finance_post_outcomes(name):
        if name in FINANCE_MAY_POST:
            continue
        assert got not in WRITES, (
            f"the matrix lets finance POST to {name} ({variant}) with {got}: finance reads only"
        )


def test_finance_reads_what_it_is_for():
    """The rule above is not vacuous: finance does read the usage report and the tree."""
    for name in ("api:report-usage", "reports:usage", "reports:usage-csv", "api:program-list"):
        assert DECISIONS[name].get.split()[FINANCE] == "200", name
