"""Values the budget API refuses: percents outside 0-100 or not numbers, sums past 100 %,
and dates that are not dates or end before they start."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.governance.api_bad_input.helpers import (
    client_for,
    refused,
    request_by_pi,
    snapshot,
    split,
)

pytestmark = pytest.mark.django_db


# --- Percent outside 0-100 or not a number -------------------------------------------------


@pytest.mark.parametrize("percent", ["100.01", "-1", 250])
def test_split_percent_outside_0_to_100_is_refused_naming_it(personas, unchanged, percent):
    payload = split(personas, shares=[{"node": personas.project_a1.pk, "percent": percent}])
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    body = refused(response, 400, "shares[0].percent")
    assert body["detail"].startswith("shares[0].percent: ")


@pytest.mark.parametrize("percent", ["lots", "", None, "1e400", "NaN", [50], {"v": 1}])
def test_split_percent_that_is_not_a_number_is_refused_naming_it(personas, unchanged, percent):
    payload = split(personas)
    payload["shares"][1]["percent"] = percent
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "shares[1].percent")


def test_request_percent_outside_0_to_100_is_refused_naming_the_line(personas, unchanged):
    payload = request_by_pi(personas, lines=[{"node": personas.project_a1.pk, "percent": "101"}])
    response = client_for(personas.pi).post("/api/approval-requests/", payload, format="json")
    refused(response, 400, "lines[0].percent")


def test_request_percent_that_is_not_a_number_is_refused_naming_the_line(personas, unchanged):
    payload = request_by_pi(personas, lines=[{"node": personas.project_a1.pk, "percent": "ten"}])
    response = client_for(personas.pi).post("/api/approval-requests/", payload, format="json")
    refused(response, 400, "lines[0].percent")


def test_split_with_three_decimals_is_refused_naming_the_percent(personas, unchanged):
    payload = split(personas, shares=[{"node": personas.project_a1.pk, "percent": "33.333"}])
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "shares[0].percent")


# --- Sums past 100 % -----------------------------------------------------------------------


def test_split_whose_children_sum_past_100_is_refused(personas, unchanged):
    # Detection 75 + Segmentation 30 (unchanged) = 105 %.
    payload = split(personas, shares=[{"node": personas.project_a1.pk, "percent": "75"}])
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    body = refused(response, 400, "shares")
    assert "105.00" in body["errors"]["shares"][0]


def test_approving_a_request_that_would_sum_past_100_is_refused(personas):
    payload = request_by_pi(personas, lines=[{"node": personas.project_a1.pk, "percent": "80"}])
    created = client_for(personas.pi).post("/api/approval-requests/", payload, format="json")
    assert created.status_code == 201  # a PI may ask for more than is free today
    before = snapshot()
    response = client_for(personas.program_manager).post(
        f"/api/approval-requests/{created.json()['id']}/approve/"
    )
    refused(response, 400, "shares")
    assert snapshot() == before


def test_the_same_node_twice_in_a_split_is_refused(personas, unchanged):
    node = personas.project_a1.pk
    payload = split(
        personas, shares=[{"node": node, "percent": "10"}, {"node": node, "percent": "20"}]
    )
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "shares")


def test_an_empty_split_is_refused(personas, unchanged):
    response = client_for(personas.program_manager).post(
        "/api/splits/", split(personas, shares=[]), format="json"
    )
    refused(response, 400, "shares")


# --- Dates ---------------------------------------------------------------------------------


def test_split_valid_to_before_valid_from_is_refused_naming_valid_to(personas, unchanged):
    start = timezone.now() + timedelta(days=2)
    payload = split(
        personas,
        valid_from=start.isoformat(),
        valid_to=(start - timedelta(days=1)).isoformat(),
    )
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "valid_to")


def test_request_effective_to_before_effective_from_is_refused_naming_it(personas, unchanged):
    start = timezone.now() + timedelta(days=2)
    payload = request_by_pi(
        personas,
        effective_from=start.isoformat(),
        effective_to=(start - timedelta(hours=1)).isoformat(),
    )
    response = client_for(personas.pi).post("/api/approval-requests/", payload, format="json")
    refused(response, 400, "effective_to")


def test_a_date_that_is_not_a_date_is_refused_naming_it(personas, unchanged):
    payload = split(personas, valid_from="next tuesday")
    response = client_for(personas.program_manager).post("/api/splits/", payload, format="json")
    refused(response, 400, "valid_from")
