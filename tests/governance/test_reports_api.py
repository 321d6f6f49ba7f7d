"""GET /api/reports/usage/: JSON, CSV and XLSX, who may read it, and refusals naming the field."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from openpyxl import load_workbook
from rest_framework.test import APIClient

from tests.factories import ClusterFactory, OrganizationFactory, ProgramFactory
from tests.governance.test_reports_selector import (  # noqa: F401 (the fixture)
    ledger_total,
    october_fixture,
)

pytestmark = pytest.mark.django_db

URL = "/api/reports/usage/"
OCTOBER = {"start": "2026-10-01", "end": "2026-10-31"}
D = Decimal


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


def _october_ledger() -> Decimal:
    from datetime import UTC, datetime

    return ledger_total(datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))


def test_finance_reads_the_report_as_json(october):
    response = client_for(october.finance).get(URL, {"month": "2026-10", "level": "program"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["title"] == "GPU usage 2026-10"
    assert body["currency"] == "USD"
    assert [(r["program"], r["cluster"], r["cost"]) for r in body["rows"]] == [
        ("Language", "b200", "4500.00"),
        ("Vision", "h100", "10.00"),
    ]
    assert D(body["totals"]["total_gpu_seconds"]) == _october_ledger()
    assert body["totals"]["cost"] == "4510.00"


def test_csv_and_xlsx_by_format_parameter_and_accept_header(october):
    client = client_for(october.org_admin)
    response = client.get(URL, {**OCTOBER, "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="gpu-usage-2026-10-project.csv"' in response["Content-Disposition"]
    lines = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert D(lines[-1]["Total GPU-seconds"]) == _october_ledger()

    response = client.get(
        URL,
        OCTOBER,
        HTTP_ACCEPT="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    )
    assert response.status_code == 200
    sheet = load_workbook(io.BytesIO(response.content))["Usage"]
    header = [c.value for c in sheet[1]]
    total = sheet.cell(row=sheet.max_row, column=header.index("Total GPU-seconds") + 1).value
    assert D(repr(total)) == _october_ledger()


@pytest.mark.parametrize("persona", ["program_manager", "pi", "researcher", "outsider"])
def test_other_roles_are_refused(october, persona):
    response = client_for(getattr(october, persona)).get(URL, OCTOBER)
    assert response.status_code == 403
    assert "finance" in response.json()["detail"]


def test_anonymous_is_refused(october):
    assert client_for(None).get(URL, OCTOBER).status_code == 403


def test_a_program_of_another_organization_is_a_404(october):
    other = ProgramFactory(organization=OrganizationFactory())
    response = client_for(october.finance).get(URL, {**OCTOBER, "program": other.pk})
    assert response.status_code == 404
    assert "program" in response.json()["errors"]


def test_one_program_of_my_organization(october):
    response = client_for(october.finance).get(URL, {**OCTOBER, "program": october.program_a.pk})
    assert response.status_code == 200
    assert [r["project"] for r in response.json()["rows"]] == ["Detection", "Segmentation"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "2026-10-31", "end": "2026-10-01"}, "end"),
        ({"start": "2026-13-01", "end": "2026-10-31"}, "start"),
        ({"start": "yesterday", "end": "2026-10-31"}, "start"),
        ({"start": "2026-10-01"}, "end"),
        ({"month": "October"}, "month"),
        ({**OCTOBER, "level": "team"}, "level"),
        ({**OCTOBER, "cluster": "h100"}, "cluster"),
        ({**OCTOBER, "cluster": "999999"}, "cluster"),
        ({**OCTOBER, "program": "-3"}, "program"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(october, params, field):
    response = client_for(october.finance).get(URL, params)
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body["errors"]
    assert body["detail"].startswith(field)


def test_bad_input_is_json_even_when_a_file_was_asked_for(october):
    response = client_for(october.finance).get(URL, {"month": "2026-99", "format": "xlsx"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert "month" in response.json()["errors"]


def test_a_cluster_of_another_organization_is_refused_like_a_missing_one(october):
    other = ClusterFactory(organization=OrganizationFactory())
    response = client_for(october.finance).get(URL, {**OCTOBER, "cluster": other.pk})
    assert response.status_code == 400
    assert response.json()["errors"] == {"cluster": [f"No cluster with id {other.pk}."]}


def test_nobody_writes(october):
    response = client_for(october.finance).post(URL, {}, format="json")
    assert response.status_code == 405


def test_the_report_is_in_the_openapi_schema(october):
    response = client_for(october.finance).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    operation = response.json()["paths"][URL]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"start", "end", "level", "cluster"}
    assert set(operation["responses"]["200"]["content"]) == {
        "application/json",
        "text/csv",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    }
