"""Queue keys: they sort like the order, and a cycle changes as few of them as it can."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.services.queue_keys import SPACING, queue_keys_assign


def _applied(order, old):
    changed = queue_keys_assign(order, old)
    return {w: changed.get(w, old.get(w)) for w in order}, changed


def _longest_increasing_length(keys: list[int]) -> int:
    """Quadratic, written independently of the module's patience sort."""
    best = [1] * len(keys)
    for i in range(len(keys)):
        for j in range(i):
            if keys[j] < keys[i]:
                best[i] = max(best[i], best[j] + 1)
    return max(best, default=0)


def test_workloads_that_leave_or_arrive_at_the_end_change_no_other_key():
    keys, changed = _applied([2, 3, 4], {1: 10, 2: 20, 3: 30})
    assert changed == {4: 30 + SPACING}
    assert keys == {2: 20, 3: 30, 4: 30 + SPACING}


def test_a_newcomer_between_two_gets_the_middle_of_their_gap():
    old = {1: 10 * SPACING, 2: 40 * SPACING}
    assert queue_keys_assign([1, 4, 5, 2], old) == {4: 20 * SPACING, 5: 30 * SPACING}


def test_a_newcomer_at_the_front_goes_below_the_first_key():
    assert queue_keys_assign([7, 1], {1: 10}) == {7: 10 - SPACING}


def test_two_that_swap_change_one_key():
    keys, changed = _applied([2, 1, 3], {1: 10, 2: 20, 3: 30})
    assert len(changed) == 1
    assert keys[2] < keys[1] < keys[3]


def test_a_gap_too_narrow_widens_until_there_is_room():
    keys, _ = _applied([1, 4, 2], {1: 10, 2: 11})
    assert keys == {1: SPACING, 4: 2 * SPACING, 2: 3 * SPACING}


def _longest_kept(order, old, changed) -> None:
    known = [old[w] for w in order if old.get(w) is not None]
    kept = [w for w in order if w not in changed]
    assert all(old.get(w) is not None for w in kept)
    assert len(kept) == _longest_increasing_length(known)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 60), unique=True, max_size=40),
    st.dictionaries(st.integers(0, 60), st.integers(-50, 50) | st.none(), max_size=40),
)
def test_keys_sort_like_the_order_whatever_was_stored(order, old):
    keys, _ = _applied(order, old)
    along = [keys[w] for w in order]
    assert along == sorted(set(along))  # strictly increasing


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 60), unique=True, max_size=40),
    st.dictionaries(st.integers(0, 60), st.integers(-50, 50).map(lambda k: k * SPACING)),
)
def test_with_room_in_every_gap_only_the_fewest_keys_change(order, old):
    keys, changed = _applied(order, old)
    along = [keys[w] for w in order]
    assert along == sorted(set(along))
    _longest_kept(order, old, changed)


def test_two_projects_swapping_every_cycle_never_run_out_of_room():
    """A and B trade places cycle after cycle between fixed neighbours: each cycle changes
    about one project's keys, never the neighbours' every time."""
    a, b = list(range(100, 400)), list(range(500, 800))
    before, after = [1, 2], [3, 4]
    old = queue_keys_assign([*before, *a, *b, *after], {})
    changes = []
    for turn in range(200):
        order = [*before, *(b + a if turn % 2 == 0 else a + b), *after]
        changed = queue_keys_assign(order, old)
        old.update(changed)
        along = [old[w] for w in order]
        assert along == sorted(set(along))
        changes.append(len(changed))
    # One project's 300 keys, and at most a few of the neighbours' when a gap has narrowed.
    assert min(changes) == 300
    assert max(changes) <= 310
