"""Fair Tree ranking: siblings by usage-share / share, depth-first, budgeted first."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.engine import BudgetNode
from scheduler.engine.fairtree import BudgetTree
from tests.engine.test_spec_properties import SPEC


def test_slurm_fair_tree_example_account_level_decides_before_user_usage():
    # The example of Slurm's Fair Tree documentation (https://slurm.schedmd.com/fair_tree.html,
    # "Overview for End Users"): root => Acct1 => Acct12 => UserA and
    # root => Acct1 => Acct16 => UserB. Acct1 is the first common ancestor, so the
    # comparison of Acct12 and Acct16 decides which user ranks higher, whatever the users'
    # own usage. Here UserA has used less than UserB, but Acct12 as a whole (UserA + UserC)
    # is further over its share than Acct16, so UserB ranks above every user of Acct12.
    tree = BudgetTree(
        BudgetNode(
            "root",
            100,
            [
                BudgetNode(
                    "Acct1",
                    100,
                    [
                        BudgetNode(
                            "Acct12", 50, [BudgetNode("UserA", 50), BudgetNode("UserC", 50)]
                        ),
                        BudgetNode("Acct16", 50, [BudgetNode("UserB", 100)]),
                    ],
                )
            ],
        )
    )
    ranking = tree.rank({"UserA": 10.0, "UserC": 90.0, "UserB": 50.0})
    # Level by level (usage / share): Acct16 50/50 = 1 < Acct12 100/50 = 2, so Acct16 first;
    # inside Acct12, UserA 10/50 < UserC 90/50.
    assert ranking.order == ["UserB", "UserA", "UserC"]


def test_every_project_of_a_higher_ranked_program_ranks_above_the_other_programs():
    tree = BudgetTree(
        BudgetNode(
            "org",
            100,
            [
                BudgetNode("vision", 60, [BudgetNode("v1", 50), BudgetNode("v2", 50)]),
                BudgetNode("nlp", 40, [BudgetNode("n1", 50), BudgetNode("n2", 50)]),
            ],
        )
    )
    # vision: (0 + 600) / 60 = 10; nlp: (1 + 599) / 40 = 15 -> vision first, even though
    # n1 alone has used almost nothing.
    ranking = tree.rank({"v1": 0.0, "v2": 600.0, "n1": 1.0, "n2": 599.0})
    assert ranking.order == ["v1", "v2", "n1", "n2"]


def test_unbudgeted_projects_rank_after_budgeted_ones_by_usage_then_name():
    tree = BudgetTree(BudgetNode("org", 100, [BudgetNode("a", 50), BudgetNode("b", 50)]))
    ranking = tree.rank({"a": 1e9, "b": 5.0, "zz": 0.0, "yy": 0.0, "x": 3.0}, ["zz", "yy", "x"])
    assert ranking.order == ["b", "a", "yy", "zz", "x"]


def test_order_sees_a_list_of_projects_changed_in_place_between_calls():
    # The tree remembers the last projects it was given and which of them have no budget;
    # a caller that changes the same list in place must still get its new projects ranked.
    tree = BudgetTree(BudgetNode("org", 100, [BudgetNode("a", 50), BudgetNode("b", 50)]))
    projects = ["a", "b"]
    assert tree.order({"a": 1.0}, projects) == ["b", "a"]
    projects.append("zz")
    assert tree.order({"a": 1.0}, projects) == ["b", "a", "zz"]
    projects.remove("zz")
    assert tree.order({"a": 1.0}, projects) == ["b", "a"]


def test_ties_between_siblings_go_to_the_lower_name():
    tree = BudgetTree(BudgetNode("org", 100, [BudgetNode("b", 50), BudgetNode("a", 50)]))
    assert tree.rank({}).order == ["a", "b"]


def test_zero_share_project_counts_as_unbudgeted():
    tree = BudgetTree(BudgetNode("org", 100, [BudgetNode("a", 0), BudgetNode("b", 40)]))
    assert not tree.is_budgeted("a")
    assert tree.rank({}, ["a"]).order == ["b", "a"]


def test_effective_share_is_the_product_of_shares_down_the_tree():
    tree = BudgetTree(BudgetNode("org", 100, [BudgetNode("p", 50, [BudgetNode("x", 40)])]))
    assert tree.effective_share["x"] == pytest.approx(0.2)


def test_shares_outside_0_to_100_and_duplicate_projects_are_refused():
    with pytest.raises(ValueError, match="outside 0-100"):
        BudgetTree(BudgetNode("org", 100, [BudgetNode("a", 120)]))
    with pytest.raises(ValueError, match="appears twice"):
        BudgetTree(BudgetNode("org", 100, [BudgetNode("a", 10), BudgetNode("a", 10)]))


def test_order_follows_usage_that_swaps_siblings_and_back_to_a_tie():
    # Two teams at 50 % each: lower usage first, a tie to the lower name. Asked of one tree
    # in turn, as a scheduler asks it every cycle (the tree keeps its last order).
    tree = BudgetTree(BudgetNode("org", 100, [BudgetNode("A", 50), BudgetNode("B", 50)]))
    assert tree.order({"A": 1.0, "B": 2.0}) == ["A", "B"]
    assert tree.order({"A": 3.0, "B": 2.0}) == ["B", "A"]
    assert tree.order({"A": 2.0, "B": 2.0}) == ["A", "B"]
    assert tree.order({"A": 2.0, "B": 1.0}) == ["B", "A"]


def _trees(draw, depth: int, prefix: str) -> BudgetNode:
    """A random budget node named ``prefix`` (children up to 20 wide, shares 0-100)."""
    share = draw(st.sampled_from([0, 1, 10, 25, 50, 100]))
    if depth == 0 or draw(st.booleans()):
        return BudgetNode(prefix, share)
    width = draw(st.integers(min_value=1, max_value=20))
    children = [_trees(draw, depth - 1, f"{prefix}.{i:02d}") for i in range(width)]
    return BudgetNode(prefix, share, children)


@st.composite
def _tree_and_usages(draw):
    root = _trees(draw, 3, "org")
    projects = [node.name for node in _leaves(root)] + ["stray-1", "stray-2"]
    values = st.sampled_from([0.0, 1.0, 2.0, 5.0, 10.0, 1e9])
    usages = draw(
        st.lists(
            st.dictionaries(st.sampled_from(projects), values, max_size=len(projects)),
            min_size=1,
            max_size=12,
        )
    )
    return root, projects, usages


def _leaves(node: BudgetNode) -> list[BudgetNode]:
    if not node.children:
        return [node]
    return [leaf for child in node.children for leaf in _leaves(child)]


@given(_tree_and_usages())
@SPEC
def test_order_asked_in_turn_is_the_ranking_built_from_scratch(case):
    # A tree asked for ``order`` cycle after cycle (it keeps the last order and checks it)
    # gives what a new tree ranks from scratch for the same usage, ties and wide levels
    # included.
    root, projects, usages = case
    kept = BudgetTree(root)
    for usage in usages:
        assert kept.order(usage, projects) == BudgetTree(root).rank(usage, projects).order
