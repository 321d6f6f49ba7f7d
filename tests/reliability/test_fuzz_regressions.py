"""Bugs the API fuzzer found (tests/reliability/test_fuzz_api.py), one test each.

Each failed before its fix: the fuzzer's reproduction, reduced to one request.
"""

from __future__ import annotations

import pytest
import yaml
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler.services.workloads import workload_submit

pytestmark = pytest.mark.django_db


def client_of(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=-0.3333", "limit"),  # the fuzzer's: silently the default page (200)
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
        ("offset=-1", "offset"),
        ("offset=99999999999999999999999", "offset"),  # past PostgreSQL's bigint
        ("limit=99999999999999999999999", "limit"),  # was a 500 (DataError: out of range)
    ],
)
def test_a_malformed_page_is_a_400_naming_the_parameter(personas, query, field):
    response = client_of(personas.org_admin).get(f"/api/clusters/?{query}")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_a_wellformed_page_still_works(personas):
    response = client_of(personas.org_admin).get("/api/programs/?limit=1&offset=1")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert [p["name"] for p in body["results"]] == ["Vision"]  # ordered by name: Language, Vision


def test_an_unknown_report_format_is_a_400_naming_format(personas):
    # The fuzzer's: DRF answered 404 ("Not found."), a status the schema does not give.
    response = client_of(personas.finance).get("/api/reports/usage/?format=pdf")
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == {"format": ["Unknown format 'pdf': use json, csv or xlsx."]}


@pytest.mark.parametrize(
    "path", ["/api/approval-requests/-1.01e-07/submit/", "/api/agent/orders/null/ack/", "/api/x/"]
)
def test_an_api_url_that_matches_no_route_is_a_json_404(personas, path):
    # The fuzzer's: an id with a dot matched no route, and Django answered its HTML 404 page.
    response = client_of(personas.org_admin).post(path, {}, format="json")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}


def test_a_page_that_does_not_exist_is_still_the_html_404(personas):
    client = APIClient()
    client.force_login(personas.org_admin)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_the_schema_documents_the_refusals(db):
    # The fuzzer's first finding: every 400/401/403/404 was "undocumented status code".
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail"]
    workloads = schema["paths"]["/api/workloads/"]
    assert {"401", "403", "400"} <= set(workloads["get"]["responses"])
    assert {"401", "403", "400", "404", "413"} <= set(workloads["post"]["responses"])
    detail = schema["paths"]["/api/workloads/{id}/"]["get"]["responses"]
    assert detail["404"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    report = schema["paths"]["/api/reports/usage/"]["get"]["responses"]
    assert "404" in report  # a program the caller cannot see


@pytest.mark.parametrize(
    "value",
    ["0001-01-01T00:00:00%2B01:00", "not-a-date"],  # before year 1 in UTC; malformed
)
def test_an_impossible_active_at_is_a_400_naming_it(personas, value):
    response = client_of(personas.org_admin).get(f"/api/allocations/?active_at={value}")
    assert response.status_code == 400, response.content
    assert "active_at" in response.json()["errors"]


@pytest.mark.parametrize(
    "value",
    [
        "1199-04-09T10:25:42.43%2B21:32",  # the fuzzer's: PostgreSQL refused the offset (500)
        "2000-01-01T10:00:00%2B15:00",
    ],
)
def test_a_far_offset_is_read_as_its_utc_instant(personas, value):
    # Both instants are long before the baseline shares (set 30 days ago): nothing in force.
    response = client_of(personas.org_admin).get(f"/api/allocations/?active_at={value}")
    assert response.status_code == 200, response.content
    assert response.json()["count"] == 0
    now = client_of(personas.org_admin).get("/api/allocations/?active_at=2100-01-01T00:00:00Z")
    assert now.json()["count"] == 6  # the six baseline shares are open-ended


@pytest.mark.parametrize("value", ["0.59", "yes", "maybe"])
def test_an_unknown_boolean_is_a_400_not_no_filter(personas, value):
    # The fuzzer's: mine=0.59 was read as "no filter" and listed everyone's workloads.
    response = client_of(personas.researcher).get(f"/api/workloads/?mine={value}")
    assert response.status_code == 400, response.content
    assert "mine" in response.json()["errors"]


@pytest.mark.parametrize(("value", "count"), [("true", 1), ("1", 1), ("false", 0), ("", 1)])
def test_known_booleans_still_filter(personas, value, count):
    workload_submit(
        project=personas.project_a1,
        cluster=personas.cluster,
        name="mine",
        gpus=1,
        min_runtime_seconds=600,
        launch_spec={"command": ["true"]},
        submitted_by=personas.researcher,
    )
    response = client_of(personas.researcher).get(f"/api/workloads/?mine={value}")
    assert response.status_code == 200
    assert response.json()["count"] == count


def test_an_empty_query_value_means_not_given_and_the_schema_says_so(personas):
    # The fuzzer's: ``format=``, ``active_at=``, ``since=`` (empty, not in the enum or not a
    # date) were read as "not given". That is the API's convention; the schema now says so.
    report = client_of(personas.finance).get("/api/reports/usage/?format=&level=")
    assert report.status_code == 200
    assert report["Content-Type"] == "application/json"
    assert client_of(personas.org_admin).get("/api/allocations/?active_at=").json()["count"] == 6
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    for path, method in [("/api/reports/usage/", "get"), ("/api/allocations/", "get")]:
        for parameter in schema["paths"][path][method]["parameters"]:
            if parameter["in"] == "query":
                assert parameter["allowEmptyValue"] is True, (path, parameter["name"])


def test_a_new_agent_token_matches_the_schema_before_its_node_registers(personas):
    # The fuzzer's: "node": null in the 201, where the schema said "integer".
    response = client_of(personas.org_admin).post(
        "/api/node-agents/", {"cluster": personas.cluster.pk, "name": "gpu-01"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["node"] is None
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    node = schema["components"]["schemas"]["NodeAgentCreated"]["properties"]["node"]
    assert node.get("nullable") is True


def test_a_refused_state_change_is_documented_as_a_400(db):
    # The fuzzer's: submitting a request that is not a draft is a 400 the schema did not list.
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    submit = schema["paths"]["/api/approval-requests/{id}/submit/"]["post"]
    assert "400" in submit["responses"]
