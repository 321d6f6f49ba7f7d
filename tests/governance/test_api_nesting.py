"""Deeply nested JSON is a 400 naming the limit, never a 500, and changes nothing."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from scheduler.models import Workload
from tests.personas import build_personas

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("depth", [40, 5_000, 100_000])
def test_nested_json_is_refused_with_or_without_credentials(depth):
    p = build_personas()
    body = "[" * depth + "]" * depth
    anonymous = APIClient().post("/api/token/", body, content_type="application/json")
    assert anonymous.status_code == 400
    assert "nested more than 32 levels" in anonymous.json()["detail"]
    researcher = APIClient()
    researcher.force_authenticate(p.researcher)
    nested = '{"project": ' + "[" * depth + "]" * depth + "}"
    response = researcher.post("/api/workloads/", nested, content_type="application/json")
    assert response.status_code == 400
    assert not Workload.objects.exists()
