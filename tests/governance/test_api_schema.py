"""The OpenAPI schema of the API is served, validates without warnings, and its Swagger UI
uses assets served from our own static files (no CDN)."""

from __future__ import annotations

import re

import pytest
import yaml
from django.contrib.staticfiles import finders
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularAPIView
from rest_framework.test import APIClient, APIRequestFactory

from governance.api.schema_view import SchemaView

pytestmark = pytest.mark.django_db

BUDGET_PATHS = {
    "/api/organizations/",
    "/api/programs/{id}/history/",
    "/api/projects/{id}/history/",
    "/api/clusters/{id}/tree/",
    "/api/allocations/",
    "/api/splits/",
    "/api/approval-requests/",
    "/api/approval-requests/{id}/approve/",
    "/api/approval-requests/{id}/reject/",
    "/api/approval-requests/{id}/submit/",
    "/api/approval-requests/{id}/withdraw/",
    "/api/token/",
}


def test_schema_is_served_and_lists_the_budget_endpoints():
    response = APIClient().get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["info"]["title"] == "GPU-hour budget governance API"
    assert set(schema["paths"]) >= BUDGET_PATHS
    split = schema["paths"]["/api/splits/"]["post"]
    assert split["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SplitInputRequest"
    }


def test_generated_schema_is_valid_openapi(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--file", str(out))  # raises when invalid
    assert "/api/clusters/{id}/tree/" in out.read_text()


def test_schema_generation_has_no_warnings(tmp_path):
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )


def test_swagger_ui_uses_self_hosted_assets():
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+swagger-ui[^"]*)"', html)
    assert assets, html
    for url in assets:
        assert url.startswith("/static/drf_spectacular_sidecar/"), url
        assert finders.find(url.removeprefix("/static/")), url


def test_swagger_ui_loads_only_the_scripts_it_runs():
    """Swagger UI starts with the main bundle's "BaseLayout": the standalone preset, which only
    its "StandaloneLayout" uses, would be 268 kB more to fetch and compile on a first visit."""
    html = APIClient().get("/api/docs/").content.decode()
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert [s for s in scripts if "swagger-ui" in s] == [
        "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
    ], scripts
    assert "standalone" not in html


@pytest.fixture
def schema_builds(monkeypatch):
    """Count drf-spectacular's schema builds, with the kept schemas forgotten first."""
    monkeypatch.setattr(SchemaView, "_rendered", {})
    builds = []
    build = SchemaGenerator.get_schema

    def counted(self, *args, **kwargs):
        builds.append(1)
        return build(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    return builds


def test_the_schema_is_built_once_and_served_as_built(schema_builds):
    """The API docs page fetches the schema on every visit; it is built once per process,
    and what is kept is byte for byte what a fresh build serves, in each format."""
    client = APIClient()
    fresh = SpectacularAPIView.as_view()  # drf-spectacular's own view builds every time
    for accept in ("application/json", "application/vnd.oai.openapi"):
        first = client.get("/api/schema/", HTTP_ACCEPT=accept)
        again = client.get("/api/schema/", HTTP_ACCEPT=accept)
        built = fresh(APIRequestFactory().get("/api/schema/", HTTP_ACCEPT=accept)).render()
        assert first.status_code == again.status_code == 200
        assert first.content == again.content == built.content
        assert first["Content-Type"] == again["Content-Type"] == built["Content-Type"]
        assert first["Content-Disposition"] == built["Content-Disposition"]
        assert "Accept" in again["Vary"]
    # Two formats kept, two fresh builds to compare with: four builds for six answers.
    assert len(schema_builds) == 4


def test_what_a_client_may_vary_is_built_fresh_and_never_kept(schema_builds):
    """A language or media-type parameter is the caller's to choose: each such request is
    built as drf-spectacular builds it, and the store does not grow with them."""
    client = APIClient()
    for n in range(3):
        assert client.get("/api/schema/", {"lang": f"x{n}"}).status_code == 200
        answer = client.get("/api/schema/", HTTP_ACCEPT=f"application/json; q=0.{n + 1}")
        assert answer.status_code == 200
    assert len(schema_builds) == 6
    assert SchemaView._rendered == {}
