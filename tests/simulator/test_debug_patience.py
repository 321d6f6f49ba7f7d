"""``tests.bench.debug_patience`` shortens how long a debug-class workload waits before it
evicts, and nothing else.

Scenario (8 GPUs on one node, teams A and B at 50 %: 4 GPUs entitled each; ``fairshare``):
``b1`` and ``b2`` (B, 4 GPUs each, 2 h, 10-minute minimum runtime) start at 00:00 on an idle
cluster. ``d1`` (A, 1 GPU, 5 min, 15-minute minimum runtime: debug-class) arrives at 00:16:40,
when both have passed their minimum runtime; A is below its entitlement and may reclaim. An
eviction would lose 1,000 s of a 4-GPU run plus the 300 s restart, 5,200 GPU-seconds: 5,200 s
of ``d1``'s one GPU, so ``d1`` waits out its patience, which the variant caps: at its own
minimum runtime (``own``, the product: 900 s), at five minutes (300 s) or at one (60 s). The
replay wakes when the patience ends (as the tool runs it); ``d1`` then evicts one of B's runs
and starts: its wait is the cap.
"""

from tests.plain_python import plain_python_json

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig, compute_metrics, replay
from tests.bench.debug_patience import CAPS, _install
from tests.simulator.scenarios import trace, two_teams

rows = ("b1,0,7200,4,B,600,", "b2,0,7200,4,B,600,", "d1,1000,300,1,A,900,")
out = {}
for variant, cap in CAPS.items():
    _install(cap)
    config = ReplayConfig(gpus=8, policy="fairshare", incremental=False, wake_at_timers=True)
    result = replay(trace(*rows), two_teams(), config)
    d1 = next(j for j in result.jobs if j.id == "d1")
    out[variant] = [d1.first_start - d1.submit, compute_metrics(result)["preemptions"]]
_install(None)
print(json.dumps(out))
"""


def test_the_cap_is_how_long_a_debug_job_waits_before_it_evicts():
    out = plain_python_json(_SCRIPT)
    assert out == {"own": [900.0, 1], "5min": [300.0, 1], "1min": [60.0, 1]}
