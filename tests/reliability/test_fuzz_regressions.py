"""Bugs the API fuzzer found (tests/reliability/test_fuzz_api.py), one test each.

Each failed before its fix: the fuzzer's reproduction, reduced to one request.
"""

from __future__ import annotations

import pytest
import yaml
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def client_of(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=-0.3333", "limit"),  # the fuzzer's: silently the default page (200)
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
        ("offset=-1", "offset"),
        ("offset=99999999999999999999999", "offset"),  # past PostgreSQL's bigint
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
