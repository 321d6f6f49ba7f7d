"""The audit trail as org admins see it: page (/audit/), CSV export and API (/api/audit-events/).

Org admins see their organization's events only; every other persona gets 403. Filters by
action, actor and days; bad filter input is a 400 naming the field; pages of 50.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from governance.services.audit import audit_record
from tests.factories import OrganizationFactory, UserFactory, org_admin_of
from tests.personas import PERSONA_NAMES

pytestmark = pytest.mark.django_db

DAY1 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def event(org, *, action="share_change", actor=None, at=DAY1, label="Vision on h100", **kw):
    return audit_record(
        action=action,
        organization_id=org.pk,
        actor=actor,
        object_kind=kw.pop("object_kind", "program"),
        object_id=kw.pop("object_id", 1),
        object_label=label,
        at=at,
        **kw,
    )


@pytest.fixture
def trail(personas):
    """Three events of the personas' organization and one of another organization."""
    p = personas
    elsewhere = OrganizationFactory(name="Elsewhere", slug="elsewhere")
    event(
        p.organization, actor=p.program_manager, at=DAY1, before={"Detection": "50.00"},
        after={"Detection": "55.00"}, reason="Deadline.",
    )  # fmt: skip
    event(
        p.organization, action="node_drain", actor=p.org_admin, at=DAY1 + timedelta(days=1),
        label="gpu-01 (h100)", object_kind="node", before={"state": "healthy"},
        after={"state": "draining"}, reason="Fan failure.",
    )  # fmt: skip
    event(
        p.organization, action="approval_applied", at=DAY1 + timedelta(days=2),
        label="Request #9 (Vision on h100)", after={"state": "applied"},
    )  # fmt: skip
    event(elsewhere, label="Secret program on b200", reason="Not yours.")
    return p


def test_page_shows_the_org_admins_events_with_before_and_after(client, trail):
    client.force_login(trail.org_admin)
    response = client.get(reverse("audit:events"))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('data-testid="audit-event"') == 3
    assert "Secret program" not in html and "Not yours." not in html
    for text in ("Vision on h100", "50.00", "55.00", "Fan failure.", "program_manager", "system"):
        assert text in html
    assert 'href="/audit/"' in html  # the nav link


@pytest.mark.parametrize("persona", [n for n in PERSONA_NAMES if n != "org_admin"])
def test_page_and_api_refuse_every_other_persona(client, trail, persona):
    user = trail.users[persona]
    client.force_login(user)
    assert client.get(reverse("audit:events")).status_code == 403
    assert client.get(reverse("audit:export")).status_code == 403
    assert 'href="/audit/"' not in client.get(reverse("home")).content.decode()
    api = APIClient()
    api.force_login(user)
    assert api.get(reverse("api:auditevent-list")).status_code == 403


def test_an_org_admin_elsewhere_sees_only_their_own_organization(client, trail):
    other_admin = UserFactory(username="other_admin")
    org_admin_of(OrganizationFactory(name="Third", slug="third"), other_admin)
    client.force_login(other_admin)
    assert 'data-testid="audit-event"' not in client.get(reverse("audit:events")).content.decode()


def test_page_filters_by_action_actor_and_days(client, trail):
    client.force_login(trail.org_admin)
    url = reverse("audit:events")

    def shown(**params):
        return client.get(url, params).content.decode().count('data-testid="audit-event"')

    assert shown(action="node_drain") == 1
    assert shown(actor="program_manager") == 1
    assert shown(actor="system") == 1
    assert shown(since="2026-06-02") == 2
    assert shown(since="2026-06-01", until="2026-06-01") == 1
    assert shown(until="2026-05-31") == 0


@pytest.mark.parametrize(
    "params, field",
    [
        ({"action": "share_stolen"}, "action"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-06-03", "until": "2026-06-01"}, "until"),
    ],
)
def test_bad_filters_are_a_400_naming_the_field(client, trail, params, field):
    client.force_login(trail.org_admin)
    response = client.get(reverse("audit:events"), params)
    assert response.status_code == 400
    assert f'id="id_{field}_errors"' in response.content.decode()
    assert 'data-testid="audit-event"' not in response.content.decode()
    assert client.get(reverse("audit:export"), params).status_code == 400
    api = APIClient()
    api.force_login(trail.org_admin)
    refused = api.get(reverse("api:auditevent-list"), params)
    assert refused.status_code == 400 and field in refused.json()["errors"]


def test_page_is_paginated_by_50_newest_first(client, personas):
    p = personas
    for i in range(60):
        event(p.organization, at=DAY1 + timedelta(minutes=i), label=f"change {i:02d}")
    client.force_login(p.org_admin)
    first = client.get(reverse("audit:events")).content.decode()
    assert first.count('data-testid="audit-event"') == 50
    assert first.index("change 59") < first.index("change 58")
    second = client.get(reverse("audit:events"), {"page": 2}).content.decode()
    assert second.count('data-testid="audit-event"') == 10
    assert "change 00" in second and "change 59" not in second
    assert client.get(reverse("audit:events"), {"page": "x"}).status_code == 200


def test_csv_export_has_one_row_per_event_and_defuses_formulas(client, trail):
    event(trail.organization, label="=HYPERLINK(1)", reason="+cmd")
    client.force_login(trail.org_admin)
    response = client.get(reverse("audit:export"), {"action": "share_change"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["object"] for r in rows] == ["'=HYPERLINK(1)", "Vision on h100"]
    assert rows[0]["reason"] == "'+cmd"
    assert rows[1]["before"] == '{"Detection": "50.00"}'
    assert rows[1]["actor"] == "program_manager"


def test_api_lists_and_filters_the_org_admins_events(trail):
    api = APIClient()
    api.force_login(trail.org_admin)
    listed = api.get(reverse("api:auditevent-list")).json()
    assert listed["count"] == 3
    newest = listed["results"][0]
    assert newest["action"] == "approval_applied" and newest["actor"] is None
    drains = api.get(reverse("api:auditevent-list"), {"action": "node_drain"}).json()
    assert [e["reason"] for e in drains["results"]] == ["Fan failure."]
    by_pm = api.get(reverse("api:auditevent-list"), {"actor": "program_manager"}).json()
    assert by_pm["results"][0]["before"] == {"Detection": "50.00"}
    assert by_pm["results"][0]["after"] == {"Detection": "55.00"}
    window = api.get(reverse("api:auditevent-list"), {"since": "2026-06-02", "until": "2026-06-02"})
    assert [e["action"] for e in window.json()["results"]] == ["node_drain"]


@pytest.mark.parametrize(
    "params",
    [
        {"until": "9999-12-31"},
        {"since": "0001-01-01"},
        {"object_id": "99999999999999999999999"},
        {"object_id": "1.5"},
        {"actor": "a\x00b"},
        {"object_kind": "x" * 31},
    ],
)
def test_extreme_filters_are_answered_never_a_500(client, trail, params):
    api = APIClient()
    api.force_login(trail.org_admin)
    assert api.get(reverse("api:auditevent-list"), params).status_code in (200, 400)
    client.force_login(trail.org_admin)
    assert client.get(reverse("audit:events"), params).status_code in (200, 400)
    assert client.get(reverse("audit:export"), params).status_code in (200, 400)
