"""``tests.bench.deficit_causes`` on a hand-worked case: a team below its entitlement waits
while GPUs stand idle, held for another team's gang that would take that team past its own.

32 GPUs on four 8-GPU nodes; teams A and B at 50 % (16 GPUs entitled each); 2 h minimum
runtimes, but 2.5 h for ``b1`` and ``b2``. At 00:00 ``a1`` (A, 8 GPUs) and ``a2`` (A, 7) start
on two nodes, ``b1`` and ``b2`` (B, 6 each) on the other two: 1, 2 and 2 GPUs stay free.
``b3`` (B, 16 GPUs: a gang of two nodes) arrives at 00:01 and waits; past its 30-minute bound
it holds the two emptiest nodes (B's: half the nodes may be held), which it may clear once
``b1`` and ``b2``, its own project's work of a lower class, pass their protection at 02:30.
``a3`` (A, 2 GPUs) arrives at 00:50: it fits only on those two held nodes, and its 2 h
protection (to 02:50) would outlast the work the gang waits for, so it may not borrow them. B, holding 12 of its 16 GPUs, comes before A (15 of 16) in the guarantee pass,
so its gang holds them first. ``a4`` (A, 1 GPU) at 01:23:20 ends the submit window. At the
instants 01:00 and 01:15 A has work pending and holds 15 of its 16 GPUs, and 4 idle GPUs are
held for B's gang (B: 12 + 16 > 16), each node of them with room for ``a3``.
"""

from tests.bench.deficit_causes import causes
from tests.simulator.scenarios import trace, two_teams

ROWS = (
    "a1,0,36000,8,A,7200,",
    "a2,0,36000,7,A,7200,",
    "b1,0,36000,6,B,9000,",
    "b2,0,36000,6,B,9000,",
    "b3,60,3600,16,B,7200,",
    "a3,3000,3600,2,A,7200,",
    "a4,5000,3600,1,A,7200,",
)


def test_a_hold_for_a_gang_that_crosses_its_teams_entitlement_is_counted():
    totals = causes("A", "fairshare", 32, trace(*ROWS), two_teams())
    assert (totals["pending"], totals["below"]) == (2, 2)
    assert totals["deficit"] == 2 * 1
    assert totals["held crosses"] == totals["fits crosses"] == 2 * 4
    assert totals["held own"] == totals["held within"] == totals["held above"] == 0
    assert totals["others above"] == 0
