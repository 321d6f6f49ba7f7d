"""``tests.bench.walk_causes`` files each walk under the change that called for it.

Scenario (8 GPUs, teams A and B at 50 %): ``a1`` (A, 8 GPUs, 30 s) and ``b1`` (B, 8 GPUs,
10 min) are submitted at 00:00. The cycle at 00:00 walks because of the submits and starts
one of them; the other waits. ``a1`` (or ``b1``) ends by itself before the next periodic
cycle (60 s), and the cycle at its end walks because of that finish and starts the other.
Nothing is left pending, so no other cycle runs: two walks, one per cause, each starting
something. The second walk follows a walk that started work, which must not hide the finish.
"""

from tests.plain_python import plain_python_json

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig
from tests.bench.walk_causes import count_walks
from tests.simulator.scenarios import trace, two_teams

rows = ("a1,0,30,8,A,,", "b1,0,600,8,B,,")
cycles, walks, _, _ = count_walks(trace(*rows), two_teams(), ReplayConfig(gpus=8, policy="fairshare"))
print(json.dumps({"cycles": cycles, "walks": [[c, d, n] for (c, d), n in walks.items()]}))
"""


def test_a_finish_after_a_walk_that_started_work_is_counted_as_the_finish():
    out = plain_python_json(_SCRIPT)
    assert out["cycles"] == 2
    assert sorted(map(tuple, out["walks"])) == [("finish", True, 1), ("submit", True, 1)]
