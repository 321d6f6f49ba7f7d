"""``tests.bench.debug_utmost`` lets a debug-class workload evict at once whatever the
guarantee and the minimum-runtime contract let go, and nothing before a minimum runtime ends.

Scenario (8 GPUs on one node, teams A and B at 50 %: 4 GPUs entitled each, C unbudgeted;
``fairshare``). From 00:00 team A runs ``a1`` (3 GPUs) and the debug-class ``d0`` (1 GPU,
15-minute minimum runtime): A holds exactly its entitlement, and its debug allowance (a
quarter of 4 GPUs) is taken by ``d0``. C runs 4 GPUs, all above its entitlement of 0: one
4-GPU run (``own``), or two 2-GPU runs (``other``). Every run but ``d0`` lasts 2 h with a
1-hour minimum runtime. ``d1`` (A, 1 GPU, 5 min, debug-class) arrives at 01:06:40 (4,000 s),
past every minimum runtime, or at 00:50 (3,000 s), before them.

- The product: A is not below its entitlement, so it reclaims nothing, and its allowance is
  spent, so ``d1`` evicts none of A's own work either: it waits for the first end, at 02:00
  (3,200 s or 4,200 s).
- ``utmost``: ``d1`` evicts the cheapest victim the two rules allow (least work lost: fewest
  GPUs here, every run having run as long since its last checkpoint): A's own 3-GPU ``a1``
  when C's run is 4 GPUs, C's 2-GPU ``c1`` when C runs two; at once when it arrives after the
  minimum runtimes, and at 01:00, when they end, when it arrives at 00:50 (a 600 s wait).
"""

from tests.plain_python import plain_python_json

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig, replay
from tests.bench.debug_utmost import VARIANTS, _install
from tests.simulator.scenarios import trace, two_teams

RUNNING = {
    "own": ("c1,0,7200,4,C,3600,", "a1,0,7200,3,A,3600,", "d0,0,7200,1,A,900,"),
    "other": ("c1,0,7200,2,C,3600,", "c2,0,7200,2,C,3600,", "a1,0,7200,3,A,3600,",
              "d0,0,7200,1,A,900,"),
}
out = {}
for scene, running in RUNNING.items():
    for arrival in (4000, 3000):
        for variant in VARIANTS:
            _install(variant)
            config = ReplayConfig(
                gpus=8, policy="fairshare", incremental=False, wake_at_timers=True
            )
            result = replay(trace(*running, f"d1,{arrival},300,1,A,900,"), two_teams(), config)
            d1 = next(j for j in result.jobs if j.id == "d1")
            evicted = sorted(j.id for j in result.jobs for _ in range(j.preemptions))
            out[f"{scene} {variant} {arrival}"] = [d1.first_start - d1.submit, evicted]
_install("product")
print(json.dumps(out))
"""


def test_utmost_evicts_at_once_what_the_guarantee_and_the_contract_let_go():
    assert plain_python_json(_SCRIPT) == {
        "own product 4000": [3200.0, []],
        "own utmost 4000": [0.0, ["a1"]],
        "own product 3000": [4200.0, []],
        "own utmost 3000": [600.0, ["a1"]],
        "other product 4000": [3200.0, []],
        "other utmost 4000": [0.0, ["c1"]],
        "other product 3000": [4200.0, []],
        "other utmost 3000": [600.0, ["c1"]],
    }
