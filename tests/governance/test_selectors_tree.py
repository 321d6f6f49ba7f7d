"""Tree selectors: shares as of an instant, effective shares, unallocated rest, history."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from governance.selectors.tree import (
    allocation_history,
    children_of,
    children_shares,
    share_at,
    tree_for,
)
from governance.selectors.visibility import user_visibility
from tests.factories import AllocationFactory, ClusterFactory, ProjectFactory

pytestmark = pytest.mark.django_db


def allocate(personas, node, percent, *, days_from=0, days_to=None, now=None):
    now = now or timezone.now()
    return AllocationFactory(
        cluster=personas.cluster,
        program=node if node in personas.programs else None,
        project=node if node in personas.projects else None,
        percent=Decimal(percent),
        valid_from=now + timedelta(days=days_from),
        valid_to=None if days_to is None else now + timedelta(days=days_to),
        set_by=personas.org_admin,
    )


def test_share_is_zero_for_a_node_with_no_allocation(personas):
    new_project = ProjectFactory(program=personas.program_a)
    assert share_at(node=new_project, cluster=personas.cluster, at=timezone.now()) == 0


def test_share_at_follows_the_newest_row_covering_the_instant(personas):
    now = timezone.now()
    allocate(personas, personas.project_a1, "40.00", days_from=5, now=now)
    assert share_at(node=personas.project_a1, cluster=personas.cluster, at=now) == Decimal("50.00")
    assert share_at(
        node=personas.project_a1, cluster=personas.cluster, at=now + timedelta(days=6)
    ) == Decimal("40.00")


def test_temporary_grant_ends_and_the_older_open_share_applies_again(personas):
    now = timezone.now()
    allocate(personas, personas.project_a1, "65.00", days_from=1, days_to=3, now=now)
    at = personas.cluster
    assert share_at(node=personas.project_a1, cluster=at, at=now + timedelta(days=2)) == Decimal(
        "65.00"
    )
    assert share_at(node=personas.project_a1, cluster=at, at=now + timedelta(days=3)) == Decimal(
        "50.00"
    )


def test_same_start_is_won_by_the_later_row(personas):
    start = timezone.now() + timedelta(days=1)
    for percent in ("10.00", "20.00"):
        AllocationFactory(
            cluster=personas.cluster,
            program=None,
            project=personas.project_a2,
            percent=Decimal(percent),
            valid_from=start,
            set_by=personas.org_admin,
        )
    assert share_at(node=personas.project_a2, cluster=personas.cluster, at=start) == Decimal(
        "20.00"
    )


def test_tree_effective_share_is_the_product_of_shares_from_the_root(personas):
    root = tree_for(visibility=user_visibility(user=personas.org_admin), cluster=personas.cluster)
    assert root.kind == "organization"
    assert root.effective_share == 100
    assert root.unallocated == 0  # 60 + 40
    vision, language = sorted(root.children, key=lambda n: n.obj.name, reverse=True)
    assert (vision.obj.name, vision.share, vision.unallocated) == ("Vision", 60, 20)
    detection = next(c for c in vision.children if c.obj.name == "Detection")
    # 60 % of the cluster x 50 % of Vision = 30 % of 32 GPUs.
    assert detection.share == 50
    assert detection.effective_share == 30
    assert detection.gpus_entitled == pytest.approx(9.6)
    assert detection.unallocated is None
    translation = next(c for c in language.children if c.obj.name == "Translation")
    assert translation.effective_share == 28  # 40 x 70 / 100


def test_tree_names_the_managers_of_each_node(personas):
    root = tree_for(visibility=user_visibility(user=personas.org_admin), cluster=personas.cluster)
    vision = next(c for c in root.children if c.obj.name == "Vision")
    detection = next(c for c in vision.children if c.obj.name == "Detection")
    assert [u.username for u in root.managers] == ["org_admin"]
    assert [u.username for u in vision.managers] == ["program_manager"]
    assert [u.username for u in detection.managers] == ["pi"]


def test_tree_as_of_a_past_instant_shows_the_shares_then(personas):
    allocate(personas, personas.program_a, "55.00")
    before = timezone.now() - timedelta(days=1)
    vis = user_visibility(user=personas.org_admin)
    then = tree_for(visibility=vis, cluster=personas.cluster, at=before)
    now = tree_for(visibility=vis, cluster=personas.cluster)
    assert next(c for c in then.children if c.obj.name == "Vision").share == 60
    assert next(c for c in now.children if c.obj.name == "Vision").share == 55
    assert now.unallocated == 5


def test_pi_tree_shows_only_their_branch_and_hides_sibling_sums(personas):
    root = tree_for(visibility=user_visibility(user=personas.pi), cluster=personas.cluster)
    assert [c.obj.name for c in root.children] == ["Vision"]
    vision = root.children[0]
    assert [c.obj.name for c in vision.children] == ["Detection"]
    assert vision.children[0].effective_share == 30
    assert root.unallocated is None
    assert vision.unallocated is None


def test_tree_refuses_an_outsider(personas):
    with pytest.raises(PermissionDenied):
        tree_for(visibility=user_visibility(user=personas.outsider), cluster=personas.cluster)


def test_allocation_history_is_newest_first_and_per_cluster(personas):
    newer = allocate(personas, personas.project_a1, "45.00", days_from=2)
    other_cluster = ClusterFactory(organization=personas.organization, name="b200")
    AllocationFactory(
        cluster=other_cluster,
        program=None,
        project=personas.project_a1,
        percent=Decimal("10.00"),
        set_by=personas.org_admin,
    )
    history = list(allocation_history(node=personas.project_a1, cluster=personas.cluster))
    assert [a.percent for a in history] == [Decimal("45.00"), Decimal("50.00")]
    assert history[0] == newer
    assert len(allocation_history(node=personas.project_a1)) == 3


def test_children_of_and_children_shares(personas):
    assert children_of(parent=personas.organization) == [personas.program_b, personas.program_a]
    assert children_of(parent=personas.program_a) == [personas.project_a1, personas.project_a2]
    shares = dict(children_shares(parent=personas.program_b, cluster=personas.cluster))
    assert shares == {personas.project_b1: Decimal("70.00"), personas.project_b2: Decimal("30.00")}
