"""KAI queue generation as pure functions: rounding, weights, names, schema, determinism."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.adapters.kai.names import QueueNameError, queue_name
from scheduler.adapters.kai.output import queues_yaml
from scheduler.adapters.kai.queues import (
    KaiQueueError,
    QueueOptions,
    TreeNode,
    apportion,
    go_duration,
    queues_build,
)
from tests.adapters.kai.queue_schema import QUEUE_SCHEMA

VALIDATOR = jsonschema.Draft202012Validator(QUEUE_SCHEMA)


def project(slug: str, share: str) -> TreeNode:
    return TreeNode(kind="project", slug=slug, name=slug.title(), share=Decimal(share))


def program(slug: str, share: str, *children: TreeNode) -> TreeNode:
    return TreeNode(
        kind="program", slug=slug, name=slug.title(), share=Decimal(share), children=children
    )


def org(*children: TreeNode) -> TreeNode:
    return TreeNode(kind="organization", slug="acme", name="Acme", children=children)


# The personas' tree: Vision 60 % (Detection 50, Segmentation 30), Language 40 %
# (Translation 70, Summaries 30) on 32 GPUs.
ACME = org(
    program("vision", "60", project("detection", "50"), project("segmentation", "30")),
    program("language", "40", project("translation", "70"), project("summaries", "30")),
)


def by_name(queues):
    return {q.name: q for q in queues}


# --- apportion: hand-worked examples -------------------------------------------------------


def test_three_equal_thirds_hand_the_extra_unit_to_the_first():
    assert apportion([Fraction(10, 3)] * 3, cap=10) == [4, 3, 3]


def test_largest_remainder_wins_the_leftover_units():
    # 2.9 + 3.6 + 3.5 = 10: floors 2+3+3 = 8, the two leftovers go to .9 and .6.
    assert apportion([Fraction(29, 10), Fraction(36, 10), Fraction(35, 10)], cap=10) == [3, 4, 3]


def test_total_is_the_floor_of_the_ideal_sum_when_siblings_leave_some_unallocated():
    # 60 % of 10 split 50/50 = 3 + 3, but the parent has 10: nothing beyond 6 is handed out.
    assert apportion([Fraction(3), Fraction(3)], cap=10) == [3, 3]
    # 1.5 + 1.5 = 3 → one of them gets 2.
    assert apportion([Fraction(3, 2), Fraction(3, 2)], cap=10) == [2, 1]


def test_parent_cap_below_the_floors_takes_units_back_from_the_smallest_remainders():
    assert apportion([Fraction(21, 10), Fraction(28, 10)], cap=3) == [1, 2]


def test_nothing_to_share_gives_zeros():
    assert apportion([Fraction(0), Fraction(0)], cap=0) == [0, 0]
    assert apportion([], cap=5) == []


# --- the personas' tree -------------------------------------------------------------------


def test_personas_tree_quotas_weights_and_parents():
    queues = by_name(queues_build(root=ACME, options=QueueOptions(total_gpus=32, prefix="h100")))
    # Vision 60 % of 32 = 19.2, Language 12.8 → floors 19 + 12 = 31 of floor(32) = 32:
    # the leftover unit goes to Language (.8 > .2).
    expected = {
        "h100": (None, 32, 1),
        "h100-vision": ("h100", 19, 6000),
        "h100-language": ("h100", 13, 4000),
        # 50 % and 30 % of 19.2 = 9.6 and 5.76: floor(15.36) = 15 → 9+5 = 14, +1 to .76.
        "h100-vision-detection": ("h100-vision", 9, 5000),
        "h100-vision-segmentation": ("h100-vision", 6, 3000),
        # 70 % and 30 % of 12.8 = 8.96 and 3.84: floor(12.8) = 12 → 8+3 = 11, +1 to .96.
        "h100-language-translation": ("h100-language", 9, 7000),
        "h100-language-summaries": ("h100-language", 3, 3000),
    }
    got = {
        name: (q.parent, q.manifest()["spec"]["resources"]["gpu"]["quota"], q.over_quota_weight)
        for name, q in queues.items()
    }
    assert got == expected
    assert all(q.manifest()["spec"]["resources"]["gpu"]["limit"] == 32 for q in queues.values())
    assert all(q.priority == 100 for q in queues.values())


def test_fractional_step_keeps_two_decimals():
    queues = by_name(
        queues_build(
            root=ACME, options=QueueOptions(total_gpus=32, prefix="h100", step=Decimal("0.01"))
        )
    )
    assert queues["h100-vision"].manifest()["spec"]["resources"]["gpu"]["quota"] == 19.2
    assert queues["h100-vision-segmentation"].quota == Decimal("5.76")
    assert queues["h100-language-summaries"].quota == Decimal("3.84")


def test_no_burst_caps_each_queue_at_its_quota():
    queues = queues_build(root=ACME, options=QueueOptions(total_gpus=32, prefix="h", burst=False))
    assert all(q.limit == q.quota for q in queues)


def test_unbudgeted_nodes_get_no_quota_and_a_lower_priority():
    tree = org(
        program("vision", "100", project("funded", "100"), project("idle", "0")),
        program("orphan", "0", project("lost", "100")),
    )
    queues = by_name(queues_build(root=tree, options=QueueOptions(total_gpus=8, prefix="c")))
    assert (queues["c-vision-idle"].quota, queues["c-vision-idle"].priority) == (0, 50)
    assert queues["c-vision-idle"].over_quota_weight == 1
    # A project with a share under a program without one is unbudgeted too.
    assert (queues["c-orphan-lost"].quota, queues["c-orphan-lost"].priority) == (0, 50)
    assert (queues["c-vision-funded"].quota, queues["c-vision-funded"].priority) == (8, 100)


def test_min_runtime_is_written_on_the_top_queue_only():
    queues = queues_build(
        root=ACME, options=QueueOptions(total_gpus=32, prefix="h", min_runtime_seconds=5400)
    )
    top, *rest = queues
    assert top.manifest()["spec"]["preemptMinRuntime"] == "1h30m"
    assert top.manifest()["spec"]["reclaimMinRuntime"] == "1h30m"
    assert not any("preemptMinRuntime" in q.manifest()["spec"] for q in rest)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (45, "45s"), (900, "15m"), (7200, "2h"), (28_800, "8h")]
)
def test_go_duration(seconds, text):
    assert go_duration(seconds) == text


def test_every_manifest_matches_kai_queue_schema():
    for queue in queues_build(
        root=ACME, options=QueueOptions(total_gpus=32, prefix="h100", min_runtime_seconds=600)
    ):
        VALIDATOR.validate(queue.manifest())


def test_schema_refuses_what_kai_would_not_take():
    """The schema is a real check: a misspelt field, a bad name or a bad duration fail."""
    good = queues_build(root=ACME, options=QueueOptions(total_gpus=32, prefix="h"))[1].manifest()
    bad_cases = [
        ("spec", "overquotaWeight", 1),
        ("metadata", "name", "Vision_Team"),
        ("spec", "preemptMinRuntime", "2 hours"),
        ("spec", "priority", "high"),
    ]
    for section, key, value in bad_cases:
        broken = yaml.safe_load(yaml.safe_dump(good))
        broken[section][key] = value
        assert not VALIDATOR.is_valid(broken), (section, key, value)
    no_resources = yaml.safe_load(yaml.safe_dump(good))
    del no_resources["spec"]["resources"]
    assert not VALIDATOR.is_valid(no_resources)


# --- bad input ------------------------------------------------------------------------------


def test_tree_with_no_shares_is_refused_with_a_clear_message():
    tree = org(program("vision", "0", project("a", "0")), program("speech", "50"))
    with pytest.raises(KaiQueueError, match="no project of 'Acme' holds a share"):
        queues_build(root=tree, options=QueueOptions(total_gpus=8, prefix="c"))


def test_siblings_over_100_percent_are_refused_naming_their_parent():
    # The shape the property test's generator once built: programs at 100 % whose projects
    # hold nothing, plus one more program of 0.01 %. Quotas were then cut below a child's
    # one-step bound, or summed above their parent's.
    tree = org(
        program("p0", "100", project("j0", "0")),
        program("zz", "0", project("keep", "100")),
        program("yy", "0.01", project("b", "100")),
    )
    with pytest.raises(KaiQueueError, match=r"^shares: the children of 'Acme' hold 100\.01 %"):
        queues_build(
            root=tree, options=QueueOptions(total_gpus=300, prefix="c", step=Decimal("0.01"))
        )
    nested = org(program("p0", "50", project("a", "60"), project("b", "50")))
    with pytest.raises(KaiQueueError, match="children of 'P0' hold 110 %"):
        queues_build(root=nested, options=QueueOptions(total_gpus=8, prefix="c"))


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"total_gpus": 0}, "total_gpus"),
        ({"step": Decimal("0.5")}, "step"),
        ({"min_runtime_seconds": 8 * 3600 + 1}, "min_runtime"),
        ({"min_runtime_seconds": -1}, "min_runtime"),
    ],
)
def test_bad_options_name_the_option(options, field):
    with pytest.raises(KaiQueueError, match=f"^{field}:"):
        queues_build(
            root=ACME, options=QueueOptions(**({"total_gpus": 8, "prefix": "c"} | options))
        )


def test_two_nodes_with_one_name_are_refused():
    # "a-b" + "c" and "a" + "b-c" both make "x-a-b-c".
    tree = org(program("a-b", "50", project("c", "100")), program("a", "50", project("b-c", "100")))
    with pytest.raises(QueueNameError, match="'x-a-b-c' would be used by both"):
        queues_build(root=tree, options=QueueOptions(total_gpus=8, prefix="x"))


def test_names_are_normalised_and_long_names_shortened_with_a_hash():
    assert queue_name(("H100", "Vision_Team", "proj__1")) == "h100-vision-team-proj-1"
    long = queue_name(("h100", "p" * 40, "q" * 40))
    assert len(long) == 63 and re.fullmatch(r"h100-p{40}-q+-[0-9a-f]{8}", long)
    assert long == queue_name(("h100", "p" * 40, "q" * 40))  # deterministic
    assert long != queue_name(("h100", "p" * 40, "r" * 40))
    with pytest.raises(QueueNameError):
        queue_name(("h100", "__"))


# --- determinism ----------------------------------------------------------------------------


def test_same_tree_in_another_order_gives_the_same_yaml():
    shuffled = org(
        *(
            TreeNode(
                kind=p.kind,
                slug=p.slug,
                name=p.name,
                share=p.share,
                children=tuple(reversed(p.children)),
            )
            for p in reversed(ACME.children)
        )
    )
    options = QueueOptions(total_gpus=32, prefix="h100")
    first = queues_yaml(queues=queues_build(root=ACME, options=options), cluster="h100")
    second = queues_yaml(queues=queues_build(root=shuffled, options=options), cluster="h100")
    assert first == second
    documents = [d for d in yaml.safe_load_all(first) if d]
    assert [d["metadata"]["name"] for d in documents][:2] == ["h100", "h100-language"]


# --- property: random trees -----------------------------------------------------------------


@st.composite
def shares_summing_to_at_most_100(draw, max_children: int):
    """Up to ``max_children`` shares in hundredths of a percent summing to at most 100 %."""
    count = draw(st.integers(min_value=1, max_value=max_children))
    left = 10_000
    shares = []
    for _ in range(count):
        basis_points = draw(st.integers(min_value=0, max_value=left))
        left -= basis_points
        shares.append(Decimal(basis_points) / 100)
    return shares


@st.composite
def trees(draw):
    programs = []
    for i, p_share in enumerate(draw(shares_summing_to_at_most_100(5))):
        projects = [
            project(f"j{j}", str(s)) for j, s in enumerate(draw(shares_summing_to_at_most_100(6)))
        ]
        programs.append(program(f"p{i}", str(p_share), *projects))
    # Guarantee one budgeted project so the tree is accepted.
    programs.append(program("zz", "0", project("keep", "100")))
    if all(p.share == 0 for p in programs):
        programs[0] = program("p0", "1", *(programs[0].children or (project("a", "1"),)))
    tree = org(*programs)
    if not any(p.share > 0 and any(c.share > 0 for c in p.children) for p in programs):
        # One more program of 0.01 %, taken from the largest when the others leave no room
        # (siblings over 100 % are refused: that case has its own test).
        if sum(p.share for p in programs) > Decimal("99.99"):
            largest = max(range(len(programs)), key=lambda i: programs[i].share)
            big = programs[largest]
            programs[largest] = program(big.slug, str(big.share - Decimal("0.01")), *big.children)
        tree = org(*programs, program("yy", "0.01", project("b", "100")))
    return tree


@settings(max_examples=150, deadline=None)
@given(
    tree=trees(),
    total=st.integers(min_value=1, max_value=4096),
    step=st.sampled_from([Decimal("1"), Decimal("0.1"), Decimal("0.01")]),
)
def test_children_never_exceed_their_parent_and_stay_within_one_step(tree, total, step):
    queues = queues_build(root=tree, options=QueueOptions(total_gpus=total, prefix="c", step=step))
    named = by_name(queues)
    for queue in queues:
        VALIDATOR.validate(queue.manifest())
        assert queue.quota >= 0 and queue.quota % step == 0
        exact = queue.effective_share * total / 100
        assert abs(Fraction(queue.quota) - exact) < Fraction(step)
        children = [named[c] for c in queue.children]
        if children:
            assert sum((c.quota for c in children), Decimal(0)) <= queue.quota
    assert named["c"].quota == total  # the organization holds the whole cluster
