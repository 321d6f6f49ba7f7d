"""``tests.bench.above_order`` changes who is offered a GPU above entitlement first, and
nothing else.

Scenario (16 GPUs on two nodes; teams A 50 %, B 25 %, C 25 %: 8, 4 and 4 GPUs entitled;
``fairshare``; every minimum runtime 1 h). A runs the whole cluster for the first hour
(``a0a``, ``a0b``), so over the window it has used far more than B and C, which used
nothing. At 01:00 A starts ``a1`` (8 GPUs: its entitlement, 1.0 of it held), B ``b1`` (6
GPUs: 1.5 of its 4) and C two 1-GPU runs, ``c1`` (10 min) and ``c2``. At 01:01:40 ``a2`` (A)
and ``b2`` (B) ask for 1 GPU each; none is free and neither team is below its entitlement, so
neither reclaims. At 01:10 ``c1`` ends and frees one GPU above every pending team's
entitlement:
- ``window`` (the product): B has used less over the window, so ``b2`` starts (a 500 s wait)
  and ``a2`` waits for the next end, ``b2``'s at 02:10 (4,100 s);
- ``held``: A holds the smaller part of its entitlement (1.0 against 1.5), so ``a2`` starts
  and ``b2`` waits.
"""

from tests.plain_python import plain_python_json

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig, replay
from scheduler.simulator.budgets import parse_budgets
from tests.bench.above_order import VARIANTS, _install
from tests.simulator.scenarios import trace

budgets = parse_budgets({"name": "org", "share": 100, "children": [
    {"name": "A", "share": 50}, {"name": "B", "share": 25}, {"name": "C", "share": 25}]})
rows = (
    "a0a,0,3600,8,A,3600,", "a0b,0,3600,8,A,3600,",
    "a1,3600,36000,8,A,3600,", "b1,3600,36000,6,B,3600,",
    "c1,3600,600,1,C,3600,", "c2,3600,36000,1,C,3600,",
    "a2,3700,3600,1,A,3600,", "b2,3700,3600,1,B,3600,",
)
out = {}
for variant in VARIANTS:
    _install(variant)
    config = ReplayConfig(gpus=16, policy="fairshare", incremental=False, wake_at_timers=True)
    result = replay(trace(*rows), budgets, config)
    out[variant] = {j.id: j.first_start - j.submit for j in result.jobs if j.id in ("a2", "b2")}
    out[variant]["preemptions"] = sum(j.preemptions for j in result.jobs)
_install("window")
print(json.dumps(out))
"""


def test_held_offers_the_gpu_above_entitlement_to_the_team_holding_least_of_its_own():
    assert plain_python_json(_SCRIPT) == {
        "window": {"a2": 4100.0, "b2": 500.0, "preemptions": 0},
        "held": {"a2": 500.0, "b2": 4100.0, "preemptions": 0},
    }
