"""The permission matrix: every page and API route, for six personas and an anonymous visitor.

Routes are GENERATED from the URL configuration (``get_resolver()`` walked recursively), so a
new route fails ``test_route_has_a_permission_decision`` until someone writes down, in
``DECISIONS``, what each persona gets: API routes in ``permission_matrix/decisions_api.py``,
pages (and the API routes declared beside them) in ``permission_matrix/decisions_pages.py``.
The only routes left out are in ``SKIPPED`` (``permission_matrix/routes.py``), each with the
reason. The world the matrix runs in is ``permission_matrix/world.py``, the ids and bodies
each route is called with ``permission_matrix/payloads.py``.

For every route the test sends a GET and a POST as each persona (ids are the personas' own
objects: Vision, Detection, the h100 cluster, the PI's request) and, for routes that take
ids, again with another program's or organization's object (Language, Translation, a foreign
cluster, another PI's request) — the cross-tenant checks. Each request runs in a savepoint
that is rolled back, so one persona's approval does not change what the next one sees.

Outcomes, one per column in ``COLUMNS`` order:
``200 201 302 400 403 404 405`` — that status (``302``: a redirect that is *not* to sign-in);
``login`` — a redirect to the sign-in page (pages, for the anonymous visitor).
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import transaction
from django.shortcuts import resolve_url
from django.urls import reverse
from rest_framework.test import APIClient

from tests.governance.permission_matrix.decision import SAME_AS_GET, Decision
from tests.governance.permission_matrix.decisions_api import API_DECISIONS
from tests.governance.permission_matrix.decisions_pages import PAGE_DECISIONS
from tests.governance.permission_matrix.routes import ROUTES, SKIPPED
from tests.governance.permission_matrix.world import World, fast_password_hasher, world
from tests.personas import PERSONA_NAMES

# The agent-token and hostile-route tests import the matrix's names from here.
__all__ = [
    "COLUMNS",
    "DECISIONS",
    "ROUTES",
    "SAME_AS_GET",
    "SKIPPED",
    "Decision",
    "World",
    "fast_password_hasher",
    "world",
]

pytestmark = pytest.mark.django_db

COLUMNS = (*PERSONA_NAMES, "anonymous")

# The one table of decisions: API routes in decisions_api.py, pages in decisions_pages.py.
DECISIONS: dict[str, Decision] = {**API_DECISIONS, **PAGE_DECISIONS}


# --- Running one route -----------------------------------------------------------------------


def outcome(response) -> str:
    """The matrix's word for a response: its status, or ``login`` for a sign-in redirect."""
    if response.status_code == 302:
        login = resolve_url(settings.LOGIN_URL)
        return "login" if response["Location"].startswith(login) else "302"
    return str(response.status_code)


def _call(client, method: str, url: str, body: dict | None, is_api: bool):
    with transaction.atomic():
        if method == "GET":
            response = client.get(url)
        elif is_api:
            response = client.post(url, body or {}, format="json")
        else:
            response = client.post(url, body or {})
        transaction.set_rollback(True)  # the next persona sees the same world
    return response


def _expected_post(declared: str | None, get_expected: str) -> str:
    if declared is None:
        return " ".join(["405"] * len(PERSONA_NAMES) + [get_expected.split()[-1]])
    if declared == SAME_AS_GET:
        return get_expected
    return declared


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_route_answers_each_persona_as_declared(name, world):
    route = ROUTES[name]
    if name not in DECISIONS:
        pytest.fail(
            f"add a permission decision for route {name} ({route.route}) to DECISIONS in "
            f"{__name__}: what do {', '.join(COLUMNS)} get for GET and POST?",
            pytrace=False,
        )
    decision = DECISIONS[name]
    if route.takes_ids:
        assert decision.url and decision.other, (
            f"route {name} takes ids: give url= (the personas' own object) and other= (another "
            "program's or organization's object, for the cross-tenant check)"
        )

    variants = [("own", decision.url, decision.get, decision.post, decision.payload)]
    if decision.other or decision.payload_other:
        post_other = decision.post_other
        if decision.post in (None, SAME_AS_GET):
            post_other = decision.post
        assert post_other is not None or decision.post is None, (
            f"route {name} accepts POST: declare post_other for the cross-tenant object"
        )
        variants.append(
            (
                "other",
                decision.other or decision.url,
                decision.get_other or decision.get,
                post_other,
                decision.payload_other or decision.payload,
            )
        )

    clients = {}
    for column in COLUMNS:
        client = APIClient()
        if column != "anonymous":
            client.force_login(world.p.users[column])
        clients[column] = client

    mismatches = []
    for variant, kwargs_of, get_expected, post_declared, payload in variants:
        assert get_expected, f"route {name}: declare get_{variant}"
        url = reverse(name, kwargs=kwargs_of(world) if kwargs_of else None)
        checks = [("GET", get_expected), ("POST", _expected_post(post_declared, get_expected))]
        for method, expected_line in checks:
            expected = expected_line.split()
            assert len(expected) == len(COLUMNS), f"{name} {method}: {len(COLUMNS)} outcomes"
            for column, want in zip(COLUMNS, expected, strict=True):
                body = payload(world, column) if payload and method == "POST" else None
                got = outcome(_call(clients[column], method, url, body, name.startswith("api:")))
                if got != want:
                    mismatches.append(f"{method} {url} ({variant}) as {column}: {got}, want {want}")
    assert not mismatches, f"route {name}:\n" + "\n".join(mismatches)


def test_every_decision_names_a_route_that_exists():
    stale = sorted(set(DECISIONS) - set(ROUTES))
    assert not stale, f"DECISIONS lists routes that no longer exist: {stale}"


def test_the_matrix_covers_pages_and_api():
    names = set(ROUTES)
    assert any(n.startswith("api:") for n in names)
    assert "home" in names
    assert not any(n.startswith("<unnamed") for n in names), "name every route"
