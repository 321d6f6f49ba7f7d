"""``tests.bench.guarantee_gang_holds``: with ``yields``, a gang that would take its team past
its entitlement holds nothing in the guarantee pass, and nothing else changes.

The case of ``test_deficit_causes`` (32 GPUs on four nodes, teams A and B at 16 GPUs each):
B's gang ``b3`` (16 GPUs; B holds 12) holds the two nodes with 2 free GPUs each from 00:31 on.
``a3`` (A, 2 GPUs; A holds 15 of its 16) arrives at 00:50 and fits only there. As the product
is, it waits: B, holding the smaller part of its entitlement, comes first in the guarantee
pass and its gang holds those nodes before A's turn. With ``yields`` it starts at once, in A's
guarantee turn, and the gang holds in the ordinary pass after it. The gang starts at 02:30
either way, clearing ``b1`` and ``b2`` once past their protection: ``a3`` runs an hour.
"""

from tests.plain_python import plain_python_json

_SCRIPT = """
import json
from scheduler.simulator import ReplayConfig, replay
from tests.bench.guarantee_gang_holds import VARIANTS, _install
from tests.simulator.scenarios import trace
from tests.simulator.test_deficit_causes import ROWS
from tests.simulator.scenarios import two_teams

out = {}
for variant in VARIANTS:
    _install(variant)
    config = ReplayConfig(gpus=32, policy="fairshare", incremental=False)
    jobs = {j.id: j for j in replay(trace(*ROWS), two_teams(), config).jobs}
    out[variant] = {i: jobs[i].first_start - jobs[i].submit for i in ("a3", "b3")}
_install("none")
print(json.dumps(out))
"""


def test_with_yields_the_guaranteed_workload_starts_on_the_gangs_nodes_at_once():
    out = plain_python_json(_SCRIPT)
    assert out["none"]["a3"] > 0
    assert out["yields"]["a3"] == 0
    assert out["none"]["b3"] == out["yields"]["b3"] == 9000 - 60
