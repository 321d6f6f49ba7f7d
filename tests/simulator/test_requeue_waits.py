"""``tests.bench.requeue_waits`` files a wait after a preemption under what evicted it.

Scenario (8 GPUs on one node, teams A and B at 50 %: 4 GPUs entitled each; ``fairshare``):
``b1`` and ``b2`` (B, 4 GPUs each, 2 h, 10-minute minimum runtime) start at 00:00 on an idle
cluster, B then runs 4 GPUs above its entitlement. ``a1`` (A, 4 GPUs, 10 min) arrives at
00:16:40, when both have passed their minimum runtime: A is below its entitlement and
reclaims one of them (B keeps its own 4 GPUs). The victim waits until ``a1`` ends, 600 s
later, and restarts on its GPUs: one wait of 600 s, after a reclaim, which is also the one
wait ``metrics.json`` counts.
"""

from tests.plain_python import plain_python_json

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig
from tests.bench.requeue_waits import requeue_waits_by_cause
from tests.simulator.scenarios import trace, two_teams

rows = ("b1,0,7200,4,B,600,", "b2,0,7200,4,B,600,", "a1,1000,600,4,A,600,")
config = ReplayConfig(gpus=8, policy="fairshare")
waits, counted = requeue_waits_by_cause(trace(*rows), two_teams(), config)
print(json.dumps({"waits": dict(waits), "counted": counted}))
"""


def test_a_reclaim_victims_wait_is_filed_under_reclaim():
    out = plain_python_json(_SCRIPT)
    assert out == {"waits": {"reclaim": [600.0]}, "counted": 1}
