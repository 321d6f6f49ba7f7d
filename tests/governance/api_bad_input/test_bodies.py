"""Bodies that are not JSON, not an object, too large, or missing fields."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from tests.governance.api_bad_input.helpers import (
    client_for,
    refused,
    snapshot,
    split,
)

pytestmark = pytest.mark.django_db


# --- Bodies that are not JSON, or too large ------------------------------------------------


def test_a_body_that_is_not_json_is_a_400(personas, unchanged):
    response = client_for(personas.program_manager).post(
        "/api/splits/", data="{'parent': oops", content_type="application/json"
    )
    body = refused(response, 400)
    assert body["detail"].startswith("JSON parse error")


def test_a_body_that_is_not_json_at_all_is_a_415(personas, unchanged):
    response = client_for(personas.program_manager).post(
        "/api/splits/", data="parent=1&cluster=1", content_type="application/x-www-form-urlencoded"
    )
    body = refused(response, 415)
    assert "application/x-www-form-urlencoded" in body["detail"]


def test_a_json_body_that_is_not_an_object_is_refused(personas, unchanged):
    response = client_for(personas.program_manager).post(
        "/api/splits/", data="[1, 2, 3]", content_type="application/json"
    )
    refused(response, 400, "non_field_errors")


def test_an_oversized_body_is_a_413_and_changes_nothing(personas, unchanged, settings):
    payload = split(personas, reason="x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1))
    response = client_for(personas.program_manager).post(
        "/api/splits/", data=json.dumps(payload), content_type="application/json"
    )
    body = refused(response, 413)
    assert body["detail"] == "Request body is too large."


def test_an_oversized_body_to_an_approval_action_is_a_413(personas, submitted, settings):
    before = snapshot()
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{submitted.pk}/approve/",
        data=json.dumps({"comment": "y" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE}),
        content_type="application/json",
    )
    refused(response, 413)
    assert snapshot() == before


def test_an_oversized_token_request_is_a_413(personas, unchanged, settings):
    response = APIClient().post(
        "/api/token/",
        data="username=pi&password=" + "z" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        content_type="application/x-www-form-urlencoded",
    )
    refused(response, 413)


def test_missing_fields_are_each_named(personas, unchanged):
    response = client_for(personas.program_manager).post("/api/splits/", {}, format="json")
    refused(response, 400, "parent", "cluster", "shares", "reason")


def test_an_unknown_parent_kind_is_refused_naming_it(personas, unchanged):
    payload = split(personas, parent={"kind": "project", "id": personas.project_a1.pk})
    response = client_for(personas.org_admin).post("/api/splits/", payload, format="json")
    refused(response, 400, "parent.kind")
