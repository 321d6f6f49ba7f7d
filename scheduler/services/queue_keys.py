"""Queue keys: a pending workload's place in its cluster's fair-share order, stored so that a
cycle rewrites as few rows as it can.

A stored position (1, 2, 3 …) changes for every workload behind one that started: at 5,000
pending workloads a cycle rewrote thousands of rows to move each up by a few places. A key
only has to sort like the order. When a cycle's order is the previous one with some
workloads gone and some new ones slipped in, every remaining key still sorts right; only
the new ones (and the ones the order really moved) get a key, chosen in the gap between
their neighbours. The position shown to people is counted when it is read
(``scheduler.selectors.queue_positions``).

Pure Python: no Django here, so the rule can be tested on its own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence

# The distance between keys dealt afresh or added at either end. A project's whole queue
# moving into one gap (its rank changed) takes about log2(its size) bits of the gap; 2**40
# leaves room for several such moves before a stretch must widen, and 2**40 times a million
# pending workloads is still far inside the column.
SPACING = 1 << 40
# Keys stay well inside a signed 64-bit column.
LIMIT = 1 << 62
# The least distance kept between keys spread over a gap, so the next newcomers there fit.
MIN_GAP = 1 << 16


def queue_keys_assign(order: Sequence[int], old: Mapping[int, int | None]) -> dict[int, int]:
    """The keys that change when ``order`` (workload ids, first = next) replaces the stored
    keys ``old``: a dictionary of id -> new key for just those ids.

    After the change the keys of ``order`` increase strictly along it. The ids kept are a
    longest run of old keys that already increase along ``order``, so no fewer keys could
    change while there is room; the others get keys spread evenly over the gap between their
    kept neighbours. Where the gap is too narrow to leave ``MIN_GAP`` between keys (two
    projects that keep swapping places halve the same gaps), the stretch widens over its
    neighbours, twice as far each time, until it has room: a few more keys change now so
    that the next moves into the same place find room again.
    """
    keep = _longest_increasing(order, old)
    keys = [old[w] if w in keep else None for w in order]
    size = len(order)
    index = 0
    while index < size:
        if keys[index] is not None:
            index += 1
            continue
        low_end = high_end = index  # the stretch [low_end, high_end) gets new keys
        while high_end < size and keys[high_end] is None:
            high_end += 1
        widen = 1
        while True:
            low = keys[low_end - 1] if low_end else None
            high = keys[high_end] if high_end < size else None
            spread = _between(low, high, high_end - low_end)
            if spread is not None:
                break
            low_end, high_end = max(0, low_end - widen), min(size, high_end + widen)
            widen *= 2
        keys[low_end:high_end] = spread
        index = high_end
    return {w: key for w, key in zip(order, keys, strict=True) if old.get(w) != key}


def _longest_increasing(order: Sequence[int], old: Mapping[int, int | None]) -> set[int]:
    """The ids of a longest subsequence of ``order`` whose old keys strictly increase."""
    tails: list[int] = []  # tails[k]: smallest last key of an increasing run of length k+1
    tail_index: list[int] = []  # the index in ``order`` of that last key
    previous: dict[int, int] = {}  # index -> index of the element before it in its run
    for index, workload_id in enumerate(order):
        key = old.get(workload_id)
        if key is None:
            continue
        at = bisect_left(tails, key)
        if at:
            previous[index] = tail_index[at - 1]
        if at == len(tails):
            tails.append(key)
            tail_index.append(index)
        else:
            tails[at] = key
            tail_index[at] = index
    keep: set[int] = set()
    index = tail_index[-1] if tail_index else None
    while index is not None:
        keep.add(order[index])
        index = previous.get(index)
    return keep


def _between(low: int | None, high: int | None, count: int) -> list[int] | None:
    """``count`` increasing keys strictly between ``low`` and ``high`` (None: no bound), at
    least ``MIN_GAP`` apart; None when there is no room."""
    if low is None and high is None:
        return [SPACING * (i + 1) for i in range(count)]
    if high is None:
        keys = [low + SPACING * (i + 1) for i in range(count)]
        return keys if keys[-1] < LIMIT else None
    if low is None:
        keys = [high - SPACING * (count - i) for i in range(count)]
        return keys if keys[0] > -LIMIT else None
    gap = high - low
    if gap < (count + 1) * MIN_GAP:
        return None
    return [low + gap * (i + 1) // (count + 1) for i in range(count)]
