"""Sweeps: ``POST /api/workloads/bulk/`` stores up to 1,000 workloads all or none, names each
bad item by its index, and queues one scheduling cycle per cluster."""

from __future__ import annotations

import pytest

from scheduler.choices import WorkloadState
from scheduler.models import Workload
from scheduler.services.workloads import MAX_BULK_WORKLOADS
from tests.scheduler.test_api_workloads import client_for, submit_body

pytestmark = pytest.mark.django_db
URL = "/api/workloads/bulk/"


def sweep(personas, n: int, **overrides) -> dict:
    return {
        "workloads": [submit_body(personas, name=f"lr-{i}", gpus=1, **overrides) for i in range(n)]
    }


def test_a_sweep_is_stored_in_order_with_one_cycle_queued(
    personas, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_for(personas.researcher).post(URL, sweep(personas, 5), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["count"] == 5
    stored = list(Workload.objects.filter(pk__in=body["ids"]).order_by("pk"))
    assert [w.pk for w in stored] == body["ids"]
    assert [w.name for w in stored] == [f"lr-{i}" for i in range(5)]
    assert {w.state for w in stored} == {WorkloadState.PENDING}
    assert {w.submitted_by_id for w in stored} == {personas.researcher.pk}
    assert len({w.submitted_at for w in stored}) == 1
    assert len(callbacks) == 1  # one cycle for the one cluster, not one per workload


def test_a_sweep_of_the_maximum_size_is_stored(personas):
    response = client_for(personas.researcher).post(
        URL, sweep(personas, MAX_BULK_WORKLOADS), format="json"
    )
    assert response.status_code == 201
    assert Workload.objects.count() == MAX_BULK_WORKLOADS


def test_every_bad_item_is_named_by_index_and_nothing_is_stored(personas):
    body = sweep(personas, 5)
    body["workloads"][0]["gpus"] = "two"  # malformed
    body["workloads"][1]["gpus"] = 64  # more than the cluster has
    body["workloads"][2]["project"] = personas.project_b1.pk  # not the researcher's
    body["workloads"][3]["launch_spec"] = {}
    response = client_for(personas.researcher).post(URL, body, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert list(errors) == [
        "workloads[0].gpus",
        "workloads[1].gpus",
        "workloads[2].project",
        "workloads[3].launch_spec",
    ]
    assert Workload.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [({"workloads": []}, "workloads"), ({}, "workloads"), ({"workloads": "x"}, "workloads"),
     ({"workloads": [{"gpus": "two"}]}, "workloads[0].gpus")],
)  # fmt: skip
def test_malformed_sweeps_are_refused_naming_the_field(personas, body, field):
    response = client_for(personas.researcher).post(URL, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert Workload.objects.count() == 0


def test_more_than_the_maximum_is_refused_not_truncated(personas):
    response = client_for(personas.researcher).post(
        URL, sweep(personas, MAX_BULK_WORKLOADS + 1), format="json"
    )
    assert response.status_code == 400
    assert "workloads" in response.json()["errors"]
    assert Workload.objects.count() == 0


@pytest.mark.parametrize("persona", ["org_admin", "finance", "outsider"])
def test_people_who_do_not_belong_to_the_project_cannot_submit_a_sweep(personas, persona):
    response = client_for(personas.users[persona]).post(URL, sweep(personas, 2), format="json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"workloads[0].project", "workloads[1].project"}
    assert Workload.objects.count() == 0
