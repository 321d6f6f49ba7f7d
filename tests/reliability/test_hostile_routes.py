"""Every route of the URL configuration, as an org admin, a researcher, a node agent's
credentials-free caller and an anonymous visitor, with hostile values of every class in
every parameter a page or the API reads: never a 5xx, and nothing changes.

Routes and their ids come from the permission matrix (``test_permission_matrix``: the URL
configuration walked, each route's own object). Each request sets all the query parameters
the product reads to one hostile value, and a POST sends the same value in every field the
forms and serializers take (JSON for the API, a form for pages). The count of requests is
printed and recorded in ``docs/reliability.md``.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.urls import reverse
from rest_framework.test import APIClient

from governance.models import Allocation, ApprovalRequest, AuditEvent, RoleAssignment
from scheduler.models import Node, Workload
from tests.governance.test_permission_matrix import (  # noqa: F401
    DECISIONS,
    ROUTES,
    fast_password_hasher,
    world,
)
from tests.reliability.hostile import HOSTILE_TEXT as HOSTILE

pytestmark = pytest.mark.django_db

# Every parameter name the pages and the API read somewhere.
PARAMETERS = [
    "page", "limit", "offset", "state", "project", "cluster", "program", "node", "start", "end",
    "month", "period", "at", "since", "until", "action", "actor", "level", "bucket", "sort",
    "mine", "q", "live", "valid_from", "valid_to", "shown_for", "parent", "format", "days",
]  # fmt: skip
FIELDS = [
    "name", "project", "cluster", "gpus", "nodes", "min_runtime_seconds", "min_runtime_minutes",
    "declared_duration_minutes", "command", "launch_spec", "priority", "reason", "percent",
    "percents", "lines", "parent", "valid_from", "valid_to", "effective_from", "effective_to",
    "comment", "role", "user", "grant", "username", "password", "trace_source", "gpus_per_node",
    "budgets", "policies", "start_day", "days", "running", "exit_code", "confirm",
]  # fmt: skip
PERSONAS = ["org_admin", "researcher", "anonymous"]


def _state() -> tuple:
    return tuple(
        model.objects.count()
        for model in (Allocation, ApprovalRequest, AuditEvent, RoleAssignment, Node, Workload)
    )


def test_no_route_answers_a_hostile_value_with_a_5xx_and_none_changes_anything(world):  # noqa: F811
    clients = {}
    for persona in PERSONAS:
        client = APIClient(raise_request_exception=False)
        if persona != "anonymous":
            client.force_login(world.p.users[persona])
        clients[persona] = client
    # Some routes' own objects are made on first use (an audit event, say): all first.
    urls = {}
    for name in sorted(ROUTES):
        decision = DECISIONS[name]
        urls[name] = reverse(name, kwargs=decision.url(world) if decision.url else None)
    before = _state()
    failures, requests = [], 0
    for name, url in urls.items():
        is_api = name.startswith("api:")
        for value in HOSTILE:
            query = dict.fromkeys(PARAMETERS, value)
            body = dict.fromkeys(FIELDS, value)
            for persona, client in clients.items():
                with transaction.atomic():
                    responses = [client.get(url, query)]
                    if is_api:
                        responses.append(client.post(url, body, format="json"))
                    else:
                        responses.append(client.post(url, body))
                    transaction.set_rollback(True)
                requests += len(responses)
                for method, response in zip(("GET", "POST"), responses, strict=True):
                    if response.status_code >= 500:
                        failures.append(f"{method} {url} as {persona} with {value[:20]!r}: "
                                        f"{response.status_code}")  # fmt: skip
    print(f"\nhostile-input walk: {requests:,} requests over {len(ROUTES)} routes")
    assert not failures, f"{len(failures)} of {requests} requests failed:\n" + "\n".join(
        failures[:40]
    )
    assert _state() == before
