"""``tests.bench.walk_causes`` files each walk under the change that called for it.

It wraps the plain-Python engine's methods, so it runs in a child process with the native
build off (this process may have loaded the compiled engine, whose classes cannot be
wrapped).

Scenario (8 GPUs, teams A and B at 50 %): ``a1`` (A, 8 GPUs, 30 s) and ``b1`` (B, 8 GPUs,
10 min) are submitted at 00:00. The cycle at 00:00 walks because of the submits and starts
one of them; the other waits. ``a1`` (or ``b1``) ends by itself before the next periodic
cycle (60 s), and the cycle at its end walks because of that finish and starts the other.
Nothing is left pending, so no other cycle runs: two walks, one per cause, each starting
something. The second walk follows a walk that started work, which must not hide the finish.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig
from tests.bench.walk_causes import count_walks
from tests.simulator.scenarios import trace, two_teams

rows = ("a1,0,30,8,A,,", "b1,0,600,8,B,,")
cycles, walks = count_walks(trace(*rows), two_teams(), ReplayConfig(gpus=8, policy="fairshare"))
print(json.dumps({"cycles": cycles, "walks": [[c, d, n] for (c, d), n in walks.items()]}))
"""


def test_a_finish_after_a_walk_that_started_work_is_counted_as_the_finish():
    env = {**os.environ, "ENGINE_NATIVE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["cycles"] == 2
    assert sorted(map(tuple, out["walks"])) == [("finish", True, 1), ("submit", True, 1)]
