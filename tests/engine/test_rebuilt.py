"""A rebuilt engine decides what the engine it was rebuilt from decides.

The live loop rebuilds the engine from the database every cycle, and the queue page's
estimate runs a rebuilt engine forward. ``Scheduler.rebuilt`` is that rebuild in the engine's
own terms: random traces are replayed, and before every cycle a rebuilt copy runs the same
cycle; its starts (with placements) and preemptions must equal the original's. It found that
a failed search's memo outlived a hold that this cycle's walk no longer makes; that a
workload waiting out its break-even patience lost the deadline in a rebuild (a rebuilt engine
weighed the cheapest victim set anew and could evict sooner: the deadline is now handed back);
and that ``fairshare``'s memo compared only the total GPUs teams ran above their entitlement,
so one team's room shrinking while another's grew kept a search shut for up to five minutes.
"""

from __future__ import annotations

from scheduler.engine import Scheduler, make_policy
from scheduler.simulator import ReplayConfig, replay
from tests.engine.test_incremental import (
    GPUS_PER_NODE,
    SETTINGS,
    cycle_orders,
    random_histories,
    trace_of,
)


class _Compared:
    """A scheduler that, before each cycle, runs the same cycle on a rebuilt copy."""

    def __init__(self, sched: Scheduler, mismatches: list) -> None:
        self._sched = sched
        self._mismatches = mismatches
        self.compared = 0

    def __getattr__(self, name):
        return getattr(self._sched, name)

    def cycle(self, now, usage, explain=False):
        copy = self._sched.rebuilt()
        expected = cycle_orders(copy.cycle(now, usage))
        result = self._sched.cycle(now, usage, explain)
        self.compared += 1
        if cycle_orders(result) != expected:
            self._mismatches.append((now, cycle_orders(result), expected))
        return result


@SETTINGS
@random_histories
def test_a_rebuilt_engine_takes_the_same_decisions(trace_jobs, tree, nodes, policy):
    trace = trace_of(trace_jobs)
    mismatches: list = []
    wrappers: list[_Compared] = []

    def factory(node_list, budget_root, policy_name, params):
        sched = Scheduler(node_list, budget_root, policy=make_policy(policy_name), params=params)
        wrappers.append(_Compared(sched, mismatches))
        return wrappers[-1]

    config = ReplayConfig(gpus=nodes * GPUS_PER_NODE, policy=policy, record_runs=False)
    replay(trace, tree, config, scheduler_factory=factory)

    assert wrappers[0].compared > 0
    assert mismatches == []
