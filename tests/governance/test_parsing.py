"""Ids, counts, days, months and instants read from requests: one strict reader each.
Found by a hostile-input pass: "²" passed ``str.isdigit`` and then failed ``int`` (a 500)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from governance.models import Allocation
from governance.parsing import calendar_day, calendar_month, instant, whole_number
from tests.personas import build_personas


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("42", 42), ("9" * 18, int("9" * 18)), ("9" * 19, None), ("²", None),
     ("٣", None), ("-1", None), ("+1", None), (" 1", None), ("1.0", None), ("", None),
     ("0x10", None), (True, None), (-5, None), (7, 7), (None, None)],
)  # fmt: skip
def test_whole_number_reads_ascii_digits_that_fit_only(text, expected):
    assert whole_number(text) == expected


@given(st.text(max_size=30))
def test_whole_number_never_raises_and_agrees_with_the_plain_reading(text):
    value = whole_number(text)
    plain = text.isascii() and text.isdigit() and len(text) <= 18
    assert (value is not None) == plain
    if plain:
        assert value == int(text)


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["²", "٣", "9" * 30])
def test_hostile_numbers_in_the_queue_page_and_the_tree_picker_are_not_a_500(value):
    p = build_personas()
    client = Client()
    client.force_login(p.researcher)
    assert client.get("/workloads/", {"page": value}).status_code == 400
    tree = f"/clusters/{p.cluster.pk}/tree/"
    assert client.get(tree, {"cluster": value}).status_code == 200
    client.force_login(p.org_admin)
    assert client.get("/dashboards/delivery/", {"node": f"program-{value}"}).status_code in (
        200,
        404,
    )


# --- days, months and instants ------------------------------------------------------------
# Days, months and instants were read by four parsers (strptime, Django's forms, DRF,
# django-filter), each with its own rules: the usage report took 2026-01-01 written in
# fullwidth digits for a date while the other routes refused it. One reader each now.

ARABIC_DAY = "\u0662\u0660\u0662\u0666-\u0660\u0661-\u0660\u0661"  # 2026-01-01 in Arabic-Indic
ARABIC_MONTH = ARABIC_DAY[:7]
FULLWIDTH_DAY = "\uff12\uff10\uff12\uff16-01-01"  # 2026 in fullwidth digits


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2026-12-01", date(2026, 12, 1)), (" 2026-12-01 ", date(2026, 12, 1)),
     ("0001-01-01", date(1, 1, 1)), ("9999-12-31", date(9999, 12, 31)),
     ("10000-01-01", None), ("2026-02-30", None), ("2026-1-1", None), ("20261201", None),
     (ARABIC_DAY, None), (FULLWIDTH_DAY, None), ("2026-12-01T00:00", None), ("", None),
     (None, None), (20261201, None), (date(2026, 1, 2), date(2026, 1, 2))],
)  # fmt: skip
def test_calendar_day_reads_iso_days_in_ascii_only(text, expected):
    assert calendar_day(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2026-12", date(2026, 12, 1)), ("0001-01", date(1, 1, 1)), ("2026-13", None),
     ("2026-00", None), ("10000-01", None), (ARABIC_MONTH, None), ("2026-12-01", None)],
)  # fmt: skip
def test_calendar_month_reads_iso_months_in_ascii_only(text, expected):
    assert calendar_month(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2026-12-01T09:30:00Z", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
     ("2026-12-01T09:30+05:30", datetime(2026, 12, 1, 4, 0, tzinfo=UTC)),
     ("2026-12-01T09:30-0100", datetime(2026, 12, 1, 10, 30, tzinfo=UTC)),
     ("2026-12-01 09:30:00.25", datetime(2026, 12, 1, 9, 30, 0, 250000, tzinfo=UTC)),
     ("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC)),
     ("1199-04-09T10:25+21:32", datetime(1199, 4, 8, 12, 53, tzinfo=UTC)),
     ("9999-12-31T23:59-01:00", None), ("0001-01-01T00:00+01:00", None),
     ("2026-12-01T10:00+24:00", None), ("2026-12-01T10:00+05:60", None),
     ("2026-12-01T24:00", None), (ARABIC_DAY + "T00:00Z", None), ("2026-12-01T9:30", None),
     ("now", None), ("2026-12-01T09:30:00.1234567Z", None)],
)  # fmt: skip
def test_instant_reads_iso_8601_into_utc(text, expected):
    assert instant(text) == expected


@given(st.dates())
def test_every_day_reads_back_from_its_iso_form(day):
    assert calendar_day(day.isoformat()) == day
    assert calendar_month(day.isoformat()[:7]) == day.replace(day=1)


@given(
    st.datetimes(
        min_value=datetime(2, 1, 1),
        max_value=datetime(9998, 12, 31),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                                   timezone(timedelta(hours=-11))]),
    )
)  # fmt: skip
def test_every_instant_reads_back_from_its_iso_form(moment):
    assert instant(moment.isoformat()) == moment


@given(st.text(max_size=45))
def test_date_readers_never_raise(text):
    for reader in (calendar_day, calendar_month, instant):
        value = reader(text)
        if value is not None:
            assert text.strip().isascii()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "month"),
    [(ARABIC_DAY, ARABIC_MONTH), (FULLWIDTH_DAY, FULLWIDTH_DAY[:7]), ("10000-01-01", "10000-01"),
     ("2026-02-30", "2026-13")],
)  # fmt: skip
def test_one_day_reader_on_every_route_that_takes_a_day(value, month):
    """Pages and API refuse the same values with the field named (400), and change nothing."""
    p = build_personas()
    client = Client()
    client.force_login(p.org_admin)
    cluster = p.cluster.pk
    routes = [
        ("/api/reports/usage/", {"start": value, "end": "2026-12-01"}, "start"),
        ("/api/reports/usage/", {"month": month}, "month"),
        ("/api/audit-events/", {"since": value}, "since"),
        ("/api/allocations/", {"active_at": value}, "active_at"),
        (f"/api/clusters/{cluster}/tree/", {"at": value}, "at"),
        ("/reports/usage/", {"period": "month", "month": month}, "month"),
        ("/audit/", {"since": value}, "since"),
    ]  # fmt: skip
    for path, params, field in routes:
        response = client.get(path, params)
        assert response.status_code == 400, (path, params, response.status_code)
        if path.startswith("/api/"):
            body = response.json()
            assert field in body or field in body.get("errors", {}), (path, body)
        else:
            assert field in response.content.decode() or "YYYY-MM" in response.content.decode()
    # The dashboards keep their page and fall back to the default period, saying why.
    response = client.get("/dashboards/delivery/", {"period": "custom", "start": value})
    assert response.status_code == 200
    assert "Enter the start as YYYY-MM-DD. Showing the default period instead." in (
        response.content.decode()
    )


@pytest.mark.django_db
def test_the_split_editor_refuses_a_day_in_other_digits_and_saves_nothing():
    p = build_personas()
    client = Client()
    client.force_login(p.org_admin)
    before = list(Allocation.objects.values_list("pk", "percent", "valid_from", "valid_to"))
    response = client.post(
        f"/clusters/{p.cluster.pk}/split/organization/{p.organization.pk}/",
        {"valid_from": ARABIC_DAY, "reason": "r"},
    )
    assert response.status_code in (200, 400)
    assert "Enter a date as YYYY-MM-DD." in response.content.decode()
    after = list(Allocation.objects.values_list("pk", "percent", "valid_from", "valid_to"))
    assert after == before
