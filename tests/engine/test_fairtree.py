"""Fair Tree ranking: siblings by usage-share / share, depth-first, budgeted first."""

from __future__ import annotations

import pytest

from scheduler.engine import BudgetNode
from scheduler.engine.fairtree import BudgetTree


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
