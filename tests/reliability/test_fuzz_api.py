"""Schemathesis fuzzes every operation of the published OpenAPI schema as every principal.

The schema is the one the API serves (``/api/schema/``, drf-spectacular); every operation in it
is a test, in both generation modes (data that fits the schema, and data that does not). Each
generated request is sent as each of the six personas (their DRF user token), as a node agent
(an agent token) and anonymously, so every (operation x principal) pair is exercised with the
same inputs. The responses must pass:

- ``not_a_server_error``: never a 5xx, whatever the input or the caller;
- ``response_schema_conformance``: every body, errors included, matches the schema;
- ``status_code_conformance``: every status is one the schema documents;
- ``content_type_conformance``: the body's media type is a documented one;
- ``negative_data_rejection`` (negative mode): input that breaks the schema is refused (4xx).

In positive mode a quarter of the query parameters and body fields are then swapped for
hostile values of every class (``tests/reliability/hostile.py``): 64-bit overflow, unicode
digits, dates past 9999, NaN, NUL, markup, huge strings, wrong JSON types.

Ids: generated ids almost never exist, so half of the path ids and of the integer body fields
that name objects are swapped for ids of real objects of the personas' world (with their
cross-tenant counterparts), which drives requests past the 404 into the views' real work.

Bounded and repeatable: Hypothesis runs derandomized (a fixed seed derived from each test)
with ``FUZZ_EXAMPLES`` examples per operation and mode (default 12: about a minute on two
cores in ``make test``); ``make fuzz`` sets ``FUZZ_EXAMPLES=100``.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from scheduler.services.executor_reports import node_agent_create, node_register
from scheduler.services.workloads import workload_submit
from tests.factories import ClusterFactory, OrganizationFactory
from tests.personas import PERSONA_NAMES
from tests.reliability.hostile import HOSTILE_JSON, HOSTILE_TEXT

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
PRINCIPALS = (*PERSONA_NAMES, "agent", "anonymous")
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]
# Body fields that hold the id of an object; real ids are swapped in for half of the examples.
ID_FIELDS = {"project", "cluster", "node", "id", "order_id", "run_id"}


def _load_schema():
    """The schema exactly as the API serves it, with requests sent to the same WSGI app."""
    # Loaded at collection time (one test per operation): the schema view reads no data.
    return schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


SCHEMA = _load_schema()
OPERATIONS = {
    f"{op.method.upper()} {op.path}": op
    for op in (result.ok() for result in SCHEMA.get_all_operations())
}


@pytest.fixture
def keep_connection_open():
    """Keep the test's database connection across requests, as Django's test client does.

    The WSGI handler closes the connection when a request starts and finishes; the test's
    transaction (and the personas' world in it) would go with it.
    """
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def principals(personas, keep_connection_open):
    """Authorization headers by principal, and the ids of real objects (own and foreign)."""
    p = personas
    foreign_org = OrganizationFactory(name="Elsewhere Labs", slug="elsewhere")
    foreign_cluster = ClusterFactory(organization=foreign_org)
    agent, agent_token = node_agent_create(cluster=p.cluster, name="fuzz-node")
    node = node_register(agent=agent, gpus=8)
    other_agent, _ = node_agent_create(cluster=foreign_cluster, name="foreign-node")
    foreign_node = node_register(agent=other_agent, gpus=8)
    workload = workload_submit(
        project=p.project_a1,
        cluster=p.cluster,
        name="fuzz",
        gpus=1,
        min_runtime_seconds=600,
        launch_spec={"command": ["true"]},
        submitted_by=p.researcher,
    )
    headers = {
        name: {"Authorization": f"Token {Token.objects.create(user=user).key}"}
        for name, user in p.users.items()
    }
    headers["agent"] = {"Authorization": f"Token {agent_token}"}
    headers["anonymous"] = {}
    from governance.models import Allocation
    from governance.services.approvals import approval_request_create

    request = approval_request_create(
        actor=p.pi,
        parent=p.program_a,
        cluster=p.cluster,
        percents={p.project_a1: 55},
        reason="Fuzzing.",
        submit=True,
    )
    ids = sorted(
        {
            p.organization.pk,
            foreign_org.pk,
            p.cluster.pk,
            foreign_cluster.pk,
            *(obj.pk for obj in p.programs),
            *(obj.pk for obj in p.projects),
            *Allocation.objects.values_list("pk", flat=True),
            request.pk,
            workload.pk,
            node.pk,
            foreign_node.pk,
            agent.pk,
        }
    )
    return headers, ids


def _with_real_ids(data, case, ids: list[int]) -> None:
    """Swap real ids into the case's path and body for about half of the examples."""
    for name, value in (case.path_parameters or {}).items():
        if isinstance(value, int) and data.draw(st.booleans(), label=f"real {name}"):
            case.path_parameters[name] = data.draw(st.sampled_from(ids), label=name)
    body = case.body
    candidates = [body] if isinstance(body, dict) else []
    if isinstance(body, dict) and isinstance(body.get("parent"), dict):
        candidates.append(body["parent"])
    for obj in candidates:
        for key, value in list(obj.items()):
            is_id = key in ID_FIELDS and isinstance(value, int) and not isinstance(value, bool)
            if is_id and data.draw(st.booleans(), label=f"real {key}"):
                obj[key] = data.draw(st.sampled_from(ids), label=key)


def _with_hostile_values(data, case) -> None:
    """Swap a hostile value (``tests/reliability/hostile.py``: the classes a parser chokes
    on) into some of the case's query parameters and top-level body fields: the schema's own
    strategies rarely draw unicode digits, 2**70 or a NUL, which is where 500s hid."""
    for name in list(case.query or {}):
        if data.draw(st.integers(0, 3), label=f"hostile {name}?") == 0:
            case.query[name] = data.draw(st.sampled_from(HOSTILE_TEXT), label=name)
    if isinstance(case.body, dict):
        for key in list(case.body):
            if data.draw(st.integers(0, 3), label=f"hostile {key}?") == 0:
                case.body[key] = data.draw(st.sampled_from(HOSTILE_JSON), label=key)


def _has_input(op) -> bool:
    """Whether ``op`` takes anything a negative example could get wrong: a body, or a
    parameter beyond the optional credentials every operation lists."""
    if op.body.items:
        return True
    return any(
        p.is_required or "x-original-security-type" not in p.definition
        for p in op.iter_parameters()
    )


# An operation with no input of its own (``POST /api/notifications/read-all/``) has no
# invalid input to send: it is fuzzed in positive mode only.
CASES = [
    (operation, mode)
    for operation in sorted(OPERATIONS)
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode == GenerationMode.POSITIVE or _has_input(OPERATIONS[operation])
]


@pytest.mark.parametrize(
    ("operation", "mode"), CASES, ids=[f"{op}-{mode.value}" for op, mode in CASES]
)
def test_operation_as_every_principal(operation, mode, principals):
    headers, ids = principals
    strategy = OPERATIONS[operation].as_strategy(generation_mode=mode)
    checks = CHECKS + ([negative_data_rejection] if mode == GenerationMode.NEGATIVE else [])

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def fuzz(data):
        case = data.draw(strategy, label="case")
        if mode == GenerationMode.POSITIVE:
            _with_real_ids(data, case, ids)
            _with_hostile_values(data, case)
        for principal in PRINCIPALS:
            case.call_and_validate(headers=headers[principal], checks=checks)

    fuzz()
