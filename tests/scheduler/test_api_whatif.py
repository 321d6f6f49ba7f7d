"""``/api/what-if/``: ask with the split API's body or an approval request, follow to done;
bad input is a 400 naming the field, a stranger's node a 404, a role that may not a 403."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from governance.services.approvals import approval_request_create
from scheduler.models import WhatIfRun
from scheduler.services.whatif import whatif_run

pytestmark = pytest.mark.django_db
URL = "/api/what-if/"


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def split(personas, percent="40", **extra):
    return {
        "parent": {"kind": "program", "id": personas.program_a.pk},
        "cluster": personas.cluster.pk,
        "shares": [{"node": personas.project_a1.pk, "percent": percent}],
        **extra,
    }


def test_a_manager_asks_and_follows_the_run_to_done(personas):
    client = client_for(personas.program_manager)
    answer = client.post(URL, split(personas, days=7), format="json")
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert (body["state"], body["days"], body["parent"]) == (
        "queued", 7, f"program-{personas.program_a.pk}",
    )  # fmt: skip
    assert body["proposal"] == {f"project-{personas.project_a1.pk}": "40.00"}
    whatif_run(job_id=body["id"])
    done = client.get(f"{URL}{body['id']}/").json()
    assert done["state"] == "done" and done["progress"] == 1.0
    # Nothing ran on the personas' cluster: nothing to replay, and it says so.
    assert done["jobs"] == 0 and done["teams"] == [] and "nothing to replay" in done["summary"]


def test_a_request_is_previewed_by_its_decider_and_seen_by_its_requester(personas):
    asked = approval_request_create(
        actor=personas.pi, parent=personas.program_a, cluster=personas.cluster,
        percents={personas.project_a1: Decimal("55")}, reason="More for Detection.",
    )  # fmt: skip
    # Finance oversees the request but never writes, not even a preview.
    refused = client_for(personas.finance).post(URL, {"request": asked.pk}, format="json")
    assert refused.status_code == 403
    answer = client_for(personas.program_manager).post(URL, {"request": asked.pk}, format="json")
    assert answer.status_code == 202, answer.content
    assert answer.json()["request"] == asked.pk
    run = WhatIfRun.objects.get()
    assert run.proposal == {f"project-{personas.project_a1.pk}": "55.00"}
    # The PI who asked sees the preview; a researcher of another team does not.
    assert client_for(personas.pi).get(f"{URL}{run.pk}/").status_code == 200
    assert client_for(personas.outsider).get(f"{URL}{run.pk}/").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"days": 0}, "days"),
        ({"days": "many"}, "days"),
        ({"shares": [{"node": 1, "percent": "101"}]}, "shares"),
        ({"shares": []}, "shares"),
        ({"parent": {"kind": "project", "id": 1}}, "parent"),
        ({"request": 1}, "parent"),  # both shapes at once
    ],
)
def test_bad_bodies_name_the_field_and_store_nothing(personas, body, field):
    answer = client_for(personas.org_admin).post(URL, {**split(personas), **body}, format="json")
    assert answer.status_code == 400, answer.content
    assert any(name.startswith(field) for name in answer.json()["errors"])
    assert not WhatIfRun.objects.exists()


def test_shares_past_100_are_refused_by_the_service_rule(personas):
    # Detection 50 % today; Segmentation 30 %: Detection at 80 % makes 110 %.
    answer = client_for(personas.org_admin).post(URL, split(personas, "80"), format="json")
    assert answer.status_code == 400
    assert "would sum to 110.00 %" in answer.json()["errors"]["shares"][0]


def test_a_stranger_or_a_role_that_may_not_change_gets_404_or_403(personas):
    assert (
        client_for(personas.outsider).post(URL, split(personas), format="json").status_code == 404
    )
    assert client_for(personas.finance).post(URL, split(personas), format="json").status_code == 403
    assert client_for(personas.org_admin).get(f"{URL}999999/").status_code == 404
    assert not WhatIfRun.objects.exists()
