"""Direct splits by managers: who may split, the 100 % rule over time, and refused input."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from governance.models import Allocation
from governance.selectors.tree import share_at
from governance.services.allocations import allocation_split
from tests.factories import ClusterFactory, OrganizationFactory, ProgramFactory

pytestmark = pytest.mark.django_db


def allocation_rows() -> list[tuple]:
    return list(
        Allocation.objects.order_by("id").values_list(
            "id", "program_id", "project_id", "percent", "valid_from", "valid_to"
        )
    )


def split_a(personas, percents, **kwargs):
    """The program manager splits Vision (Detection 50 %, Segmentation 30 % at the start)."""
    return allocation_split(
        actor=kwargs.pop("actor", personas.program_manager),
        parent=personas.program_a,
        cluster=kwargs.pop("cluster", personas.cluster),
        percents=percents,
        reason=kwargs.pop("reason", "Rebalance for the quarter."),
        **kwargs,
    )


def test_program_manager_splits_their_program_and_rows_are_appended(personas):
    before = allocation_rows()
    rows = split_a(
        personas, {personas.project_a1: Decimal("60"), personas.project_a2: Decimal("40")}
    )
    assert [r.percent for r in rows] == [Decimal("60.00"), Decimal("40.00")]
    assert all(r.set_by == personas.program_manager for r in rows)
    assert all(r.reason == "Rebalance for the quarter." for r in rows)
    # Nothing earlier was edited: the old rows are still there, unchanged.
    assert allocation_rows()[: len(before)] == before
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("60.00")


def test_org_admin_splits_the_organization_among_programs(personas):
    allocation_split(
        actor=personas.org_admin,
        parent=personas.organization,
        cluster=personas.cluster,
        percents={personas.program_a: "70", personas.program_b: "30"},
        reason="Vision's launch.",
    )
    assert share_at(node=personas.program_a, cluster=personas.cluster) == Decimal("70.00")


def test_children_left_out_keep_their_share(personas):
    split_a(personas, {personas.project_a2: Decimal("50")})
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("50.00")
    assert share_at(node=personas.project_a2, cluster=personas.cluster) == Decimal("50.00")


@pytest.mark.parametrize("persona", ["pi", "researcher", "finance", "outsider"])
def test_only_managers_split(personas, persona):
    before = allocation_rows()
    with pytest.raises(PermissionDenied):
        split_a(personas, {personas.project_a1: Decimal("10")}, actor=personas.users[persona])
    assert allocation_rows() == before


def test_program_manager_cannot_split_another_program_or_the_organization(personas):
    with pytest.raises(PermissionDenied):
        allocation_split(
            actor=personas.program_manager,
            parent=personas.program_b,
            cluster=personas.cluster,
            percents={personas.project_b1: Decimal("10")},
            reason="No.",
        )
    with pytest.raises(PermissionDenied):
        allocation_split(
            actor=personas.program_manager,
            parent=personas.organization,
            cluster=personas.cluster,
            percents={personas.program_a: Decimal("70")},
            reason="No.",
        )


def assert_refused(personas, field, percents, **kwargs):
    before = allocation_rows()
    with pytest.raises(ValidationError) as info:
        split_a(personas, percents, **kwargs)
    assert field in info.value.message_dict, info.value.message_dict
    assert allocation_rows() == before
    return info.value.message_dict[field]


@pytest.mark.parametrize("value", ["-1", "100.01", "250", -0.5])
def test_percent_outside_0_to_100_is_refused(personas, value):
    messages = assert_refused(personas, "percent", {personas.project_a1: value})
    assert messages == ["Detection: must be between 0 and 100."]


@pytest.mark.parametrize("value", ["abc", "", None, True, "NaN", "Infinity", [10]])
def test_percent_that_is_not_a_number_is_refused(personas, value):
    messages = assert_refused(personas, "percent", {personas.project_a1: value})
    assert messages == ["Detection: must be a number."]


def test_percent_with_more_than_two_decimals_is_refused(personas):
    assert_refused(personas, "percent", {personas.project_a1: "33.333"})


def test_split_whose_children_sum_past_100_is_refused(personas):
    messages = assert_refused(
        personas,
        "shares",
        {personas.project_a1: Decimal("70.00"), personas.project_a2: Decimal("30.50")},
    )
    assert messages[0].startswith("Children of Vision would sum to 100.50 % on h100 from ")


def test_split_using_exactly_the_unallocated_rest_is_accepted(personas):
    split_a(personas, {personas.project_a1: Decimal("70.00")})
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("70.00")


def test_split_is_refused_when_only_a_future_temporary_grant_pushes_it_over(personas):
    now = timezone.now()
    # Segmentation gets 45 % for two days starting in a week (fits: 50 + 45 = 95).
    split_a(
        personas,
        {personas.project_a2: Decimal("45")},
        valid_from=now + timedelta(days=7),
        valid_to=now + timedelta(days=9),
    )
    # Raising Detection to 60 % from now fits today (60 + 30) but not during that grant.
    messages = assert_refused(personas, "shares", {personas.project_a1: Decimal("60")})
    assert "105.00 %" in messages[0]
    # Once the grant is over there is room: a raise starting after it is accepted.
    split_a(personas, {personas.project_a1: Decimal("60")}, valid_from=now + timedelta(days=9))


def test_temporary_grant_that_would_overlap_a_future_raise_is_refused(personas):
    now = timezone.now()
    split_a(personas, {personas.project_a1: Decimal("65")}, valid_from=now + timedelta(days=3))
    # Today 50 + 45 = 95 fits, but from day 3 it is 65 + 45.
    assert_refused(
        personas,
        "shares",
        {personas.project_a2: Decimal("45")},
        valid_from=now + timedelta(days=1),
        valid_to=now + timedelta(days=5),
    )


def test_valid_to_before_valid_from_is_refused(personas):
    now = timezone.now()
    messages = assert_refused(
        personas,
        "valid_to",
        {personas.project_a1: Decimal("10")},
        valid_from=now + timedelta(days=2),
        valid_to=now + timedelta(days=1),
    )
    assert messages == ["Must be after valid_from."]


def test_valid_from_in_the_past_is_refused_because_history_is_never_rewritten(personas):
    assert_refused(
        personas,
        "valid_from",
        {personas.project_a1: Decimal("10")},
        valid_from=timezone.now() - timedelta(days=2),
    )


def test_a_child_that_is_not_a_child_of_the_parent_is_refused(personas):
    messages = assert_refused(personas, "percents", {personas.project_b1: Decimal("10")})
    assert messages == ["Translation is not a child of Vision."]
    # A program is not a child of a program either.
    assert_refused(personas, "percents", {personas.program_b: Decimal("10")})


def test_a_cluster_of_another_organization_is_refused(personas):
    foreign = ClusterFactory(organization=OrganizationFactory(name="Elsewhere"), name="a100")
    messages = assert_refused(
        personas, "cluster", {personas.project_a1: Decimal("10")}, cluster=foreign
    )
    assert "another organization" in messages[0]


def test_empty_split_and_blank_reason_are_refused(personas):
    assert_refused(personas, "percents", {})
    assert_refused(personas, "reason", {personas.project_a1: Decimal("10")}, reason="  ")


def test_refusal_names_every_bad_field_at_once(personas):
    now = timezone.now()
    before = allocation_rows()
    with pytest.raises(ValidationError) as info:
        split_a(
            personas,
            {personas.project_a1: "lots", ProgramFactory(): Decimal("1")},
            reason="",
            valid_from=now + timedelta(days=1),
            valid_to=now,
        )
    assert set(info.value.message_dict) == {"percent", "percents", "reason", "valid_to"}
    assert allocation_rows() == before
