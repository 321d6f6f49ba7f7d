"""Ids and counts read from requests: ASCII digits that fit a database integer, or nothing.
Found by a hostile-input pass: "²" passed ``str.isdigit`` and then failed ``int`` (a 500)."""

from __future__ import annotations

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from governance.parsing import whole_number
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
