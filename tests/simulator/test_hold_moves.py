"""``tests.bench.hold_moves`` counts a hold that stays and one that moves.

Scenario (two nodes of 8 GPUs, one team with the whole cluster, ``fairshare``; nothing is
preemptible: every minimum runtime outlasts the scenario). One a second from 00:00, ``x`` and
``y`` (4 GPUs each) fill ``n000`` (the fullest node with room), ``z`` (6) and ``w`` (2) fill
``n001``. ``s`` (8 GPUs) arrives at 00:00:10 and is blocked: it holds the node with the most free GPUs, both have none, so the first,
``n000``. At 00:16:40 ``x`` ends: ``n000`` has 4 free, ``n001`` none, the hold stays. At
00:33:22 ``z`` ends: ``n001`` has 6 free, more than ``n000``'s 4, and the hold moves there,
letting go of ``n000``'s 4 free GPUs. At 00:50:01 ``y`` ends and ``s`` starts on the empty
``n000``: its hold ends, and no more holds are counted.
"""

from tests.plain_python import plain_python_json

# The scenario's trace rows (the module's docstring), also replayed by test_hold_persistence.
ROWS = (
    "x,0,1000,4,A,9000,",
    "y,1,3000,4,A,9000,",
    "z,2,2000,6,A,9000,",
    "w,3,9000,2,A,9000,",
    "s,10,600,8,A,9000,",
)

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig
from tests.bench.hold_moves import watch_holds
from tests.simulator.scenarios import trace, two_teams
from tests.simulator.test_hold_moves import ROWS

probe = watch_holds(trace(*ROWS), two_teams(100, 0), ReplayConfig(gpus=16, policy="fairshare"))
counts = {f"{'gang' if gang else 'single'} {what}": n for (gang, what), n in probe.counts.items()}
print(json.dumps({
    "counts": counts,
    "let_go": {"gang" if gang else "single": n for gang, n in probe.idle_let_go.items() if n},
    "holders": sorted(probe.holders),
}))
"""


def test_a_hold_that_stays_and_one_that_moves_to_an_emptier_node():
    out = plain_python_json(_SCRIPT)
    counts = out["counts"]
    assert out["holders"] == ["s"]
    assert counts["single moved"] == 1
    assert out["let_go"] == {"single": 4}
    assert counts["single kept"] >= 1  # at least the walk after x ended
    # every walk that held is the first, a kept one or a moved one
    assert counts["single walks"] == 1 + counts["single kept"] + counts["single moved"]
    assert not any(key.startswith("gang") for key in counts)
