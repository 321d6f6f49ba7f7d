"""Budget trees: validation with clear messages, effective shares, proportional budgets."""

import json

import pytest

from scheduler.simulator.budgets import BudgetError, load_budgets, parse_budgets
from scheduler.simulator.traces import TraceJob
from scheduler.traces import PHILLY_BUDGETS


def tree(*children, name="org", share=100):
    return {"name": name, "share": share, "children": list(children)}


def test_effective_share_is_the_product_down_the_tree():
    root = parse_budgets(
        tree(
            tree({"name": "a", "share": 50}, {"name": "b", "share": 25}, name="prog", share=60),
            {"name": "c", "share": 40},
        )
    )
    assert root.effective_shares() == pytest.approx({"a": 0.3, "b": 0.15, "c": 0.4})


def test_the_philly_tree_is_valid_and_leaves_tiny_teams_unbudgeted():
    root = load_budgets(PHILLY_BUDGETS)
    shares = root.effective_shares()
    assert len(shares) == 11
    assert sum(shares.values()) <= 1.0
    assert "23dbec" not in shares


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (tree({"name": "a", "share": 101}), "node 'a': share 101 is outside 0-100"),
        (tree({"name": "a", "share": -1}), "share -1 is outside 0-100"),
        (
            tree({"name": "a", "share": 60}, {"name": "b", "share": 50}),
            "node 'org': children's shares sum to 110 %, past 100 %",
        ),
        (tree({"name": "a", "share": "10"}), "node 'a': 'share' must be a number"),
        (tree({"name": "a"}), "node 'a': 'share' must be a number"),
        (tree({"share": 10}), "'name' must be a non-empty string"),
        (tree({"name": "a", "share": 10}, {"name": "a", "share": 10}), "appears twice"),
        (tree({"name": "a", "share": 10, "kids": []}), "unknown field"),
        (tree({"name": "a", "share": 10}, share=50), "the root's share must be 100"),
        (tree(), "the root has no children"),
        ([1, 2], "a node must be a JSON object"),
        ({"name": "org", "children": {"a": 1}}, "'children' must be a list"),
    ],
)
def test_invalid_trees_are_refused_naming_the_node(data, message):
    with pytest.raises(BudgetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_budgets(data)


def test_shares_summing_to_100_with_rounding_noise_are_accepted():
    parse_budgets(tree(*({"name": n, "share": 100 / 3} for n in "abc")))


def test_a_file_that_is_not_json_names_the_file_and_line(tmp_path):
    path = tmp_path / "b.json"
    path.write_text('{"name": "org",\n "share": }')
    with pytest.raises(BudgetError, match=r"b\.json: not valid JSON \(line 2"):
        load_budgets(path)


def test_a_bad_tree_in_a_file_names_the_file(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(tree({"name": "a", "share": 150})))
    with pytest.raises(BudgetError, match=r"b\.json: node 'a': share 150"):
        load_budgets(path)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(BudgetError, match="cannot read"):
        load_budgets(tmp_path / "none.json")


def test_proportional_budgets_follow_gpu_hours():
    jobs = [
        TraceJob("1", 0, 3600, 3, "big", line=2),
        TraceJob("2", 0, 3600, 1, "small", line=3),
    ]
    root = load_budgets("proportional", jobs)
    assert [(c.name, c.share) for c in root.children] == [("big", 75.0), ("small", 25.0)]
    assert sum(c.share for c in root.children) <= 100


def test_proportional_budgets_need_some_gpu_time():
    with pytest.raises(BudgetError, match="need a trace with some GPU time"):
        load_budgets("proportional", [])
