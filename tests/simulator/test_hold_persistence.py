"""``tests.bench.hold_persistence``: under ``kept`` a hold stays on its nodes while they
serve, where the product's hold, chosen afresh, moves to an emptier node.

The scenario of ``test_hold_moves`` (two nodes of 8 GPUs, one team, nothing preemptible):
``s`` (8 GPUs) is blocked from 00:00:10 and holds ``n000``. At 00:33:22 ``z`` ends and
``n001`` has 6 free GPUs, more than ``n000``'s 4: the product's hold moves there, the kept
one stays on ``n000``. At 00:50:01 ``y`` ends and ``s`` starts on the empty ``n000`` in both.
"""

import pytest

from tests.plain_python import plain_python_json

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig
from tests.bench import hold_persistence
from tests.bench.hold_moves import watch_holds
from tests.simulator.scenarios import trace, two_teams
from tests.simulator.test_hold_moves import ROWS

hold_persistence._install("{variant}")
config = ReplayConfig(gpus=16, policy="fairshare", incremental=False)
probe = watch_holds(trace(*ROWS), two_teams(100, 0), config)
jobs = probe.result.jobs
s = next(j for j in jobs if j.id == "s")
print(json.dumps({{
    "counts": {{f"{{'gang' if g else 'single'}} {{what}}": n for (g, what), n in probe.counts.items()}},
    "s_wait": s.first_start - s.submit,
}}))
"""


@pytest.mark.parametrize(("variant", "moved"), [("fresh", 1), ("kept", 0)])
def test_a_kept_hold_stays_where_a_fresh_one_moves(variant, moved):
    out = plain_python_json(_SCRIPT.format(variant=variant))
    assert out["counts"].get("single moved", 0) == moved
    assert out["counts"]["single kept"] >= 2  # after x ended, and after z ended if kept
    assert out["s_wait"] == 2991  # from 00:00:10 until y ends at 00:50:01: in both
