"""The engine's shortcuts change no decision: incremental orders equal a full recomputation.

The scheduler keeps work between cycles (a cycle in which nothing changed is skipped, a
gang remembers why clearing nodes failed, per-node values and the node order by use are
kept). ``Scheduler(incremental=False)`` recomputes all of it every cycle. Random traces —
gangs, debug work, the free lane, unbudgeted teams, over-demand — are replayed through both
and every cycle's starts (with placements) and preemptions must be identical.
"""

from __future__ import annotations

import gc
import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.engine import POLICIES, BudgetNode, Node, Scheduler, Workload, make_policy
from scheduler.simulator import ReplayConfig, replay
from scheduler.simulator.budgets import Budget
from scheduler.simulator.traces import Trace, TraceJob
from tests.engine.test_spec_properties import SPEC

HOUR = 3600.0
GPUS_PER_NODE = 8
TEAMS = ["p0", "p1", "p2", "p3", "px"]  # px never has a budget

SETTINGS = settings(SPEC, max_examples=300)


@st.composite
def jobs(draw) -> list[TraceJob]:
    """5-60 jobs over two days: 1-8 GPUs or 2-3 node gangs, minutes to a day long."""
    count = draw(st.integers(5, 60))
    out = []
    for i in range(count):
        gpus = draw(st.sampled_from([1, 1, 1, 2, 4, 8, 8, 16, 24]))
        out.append(
            TraceJob(
                id=f"j{i:03d}",
                submit_time=draw(st.floats(0, 2 * 24 * HOUR, allow_nan=False)),
                duration=draw(
                    st.sampled_from([120.0, 600.0, 1800.0, 2 * HOUR, 9 * HOUR, 30 * HOUR])
                ),
                gpus=gpus,
                project=draw(st.sampled_from(TEAMS)),
                # None: the contract decides (debug or not); 0: the free lane
                min_runtime=draw(st.sampled_from([None, None, None, 0.0, 600.0])),
                resumable=draw(st.sampled_from([None, True, False])),
            )
        )
    return sorted(out, key=lambda j: (j.submit_time, j.id))


@st.composite
def budgets(draw) -> Budget:
    """A one- or two-level tree over some of p0-p3 (px stays unbudgeted)."""
    teams = TEAMS[: draw(st.integers(1, 4))]
    weights = [draw(st.integers(1, 9)) for _ in teams]
    total = sum(weights)
    leaves = [Budget(t, 100.0 * w / total) for t, w in zip(teams, weights, strict=True)]
    if len(leaves) >= 3 and draw(st.booleans()):
        return Budget("org", 100.0, [Budget("a", 60.0, leaves[:2]), Budget("b", 40.0, leaves[2:])])
    return Budget("org", 100.0, leaves)


def cycle_orders(result) -> tuple[list, list]:
    """A cycle's starts (with placements) and preemptions, in a comparable form."""
    return (
        [(s.workload_id, sorted(s.placement.items())) for s in result.starts],
        [(p.workload_id, p.by, p.kind) for p in result.preemptions],
    )


class _Recording:
    """A scheduler whose cycles append their orders to ``log``; everything else is the
    scheduler's own (a wrapper: the native build's classes cannot be patched). With
    ``explain``, every cycle explains, as the live loop's do. With ``timers``, each entry
    also carries the next wait the engine keeps (``next_wait_timer``: a replay woken by
    timers cycles then)."""

    def __init__(self, sched: Scheduler, log: list, explain=False, timers=False) -> None:
        self._sched = sched
        self._log = log
        self._explain = explain
        self._timers = timers

    def __getattr__(self, name):
        return getattr(self._sched, name)

    def cycle(self, now, usage, explain=False):
        result = self._sched.cycle(now, usage, explain or self._explain)
        if result.starts or result.preemptions or result.drained:
            entry = (now, *cycle_orders(result))
            self._log.append((*entry, self._sched.next_wait_timer(now)) if self._timers else entry)
        return result


def _recorded(incremental: bool, log: list, explain: bool = False, timers: bool = False):
    """A scheduler factory for ``replay`` whose cycles append their orders to ``log``."""

    def factory(nodes, budget_root, policy, params):
        sched = Scheduler(
            nodes, budget_root, policy=make_policy(policy), params=params, incremental=incremental
        )
        return _Recording(sched, log, explain, timers)

    return factory


# Random traces on random budget trees and cluster sizes, under every policy.
random_histories = given(
    trace_jobs=jobs(), tree=budgets(), nodes=st.integers(2, 6), policy=st.sampled_from(POLICIES)
)


def trace_of(trace_jobs: list[TraceJob]) -> Trace:
    """The canonical trace of ``trace_jobs``, its projects named."""
    return Trace(trace_jobs, "canonical", projects=sorted({j.project for j in trace_jobs}))


def recorded_orders(
    trace: Trace,
    tree: Budget,
    gpus: int,
    policy: str,
    incremental: bool,
    explain=False,
    timers=False,
) -> list:
    """Replay ``trace``; every cycle that ordered something, as (time, starts, preemptions)
    (``cycle_orders``), on the incremental path or the full recomputation. With ``timers``
    the replay also wakes at the engine's timers, and each entry ends with the next one."""
    log: list = []
    config = ReplayConfig(gpus=gpus, policy=policy, record_runs=False, wake_at_timers=timers)
    replay(trace, tree, config, scheduler_factory=_recorded(incremental, log, explain, timers))
    return log


@SETTINGS
@random_histories
def test_incremental_orders_equal_a_full_recomputation(trace_jobs, tree, nodes, policy):
    trace = trace_of(trace_jobs)
    gpus = nodes * GPUS_PER_NODE

    reference = recorded_orders(trace, tree, gpus, policy, incremental=False)
    incremental = recorded_orders(trace, tree, gpus, policy, incremental=True)

    assert incremental == reference


@SETTINGS
@random_histories
def test_a_replay_woken_by_the_engines_timers_takes_the_same_orders_either_way(
    trace_jobs, tree, nodes, policy
):
    """When the engine next wants a cycle is an answer of its own (a replay may wake at it,
    the queue page's estimate does): both paths must keep the same waits, or they wake at
    different moments and decide differently from there on."""
    trace = trace_of(trace_jobs)
    gpus = nodes * GPUS_PER_NODE

    reference = recorded_orders(trace, tree, gpus, policy, incremental=False, timers=True)
    incremental = recorded_orders(trace, tree, gpus, policy, incremental=True, timers=True)

    assert incremental == reference


@SETTINGS
@random_histories
def test_explaining_every_cycle_changes_no_order(trace_jobs, tree, nodes, policy):
    """The live loop explains every cycle (each pending workload's reason); the simulator
    does not. Both must decide alike."""
    trace = trace_of(trace_jobs)
    gpus = nodes * GPUS_PER_NODE

    quiet = recorded_orders(trace, tree, gpus, policy, incremental=True)
    explained = recorded_orders(trace, tree, gpus, policy, incremental=True, explain=True)

    assert explained == quiet


def test_a_gang_held_past_its_bound_gets_the_same_nodes_either_way():
    """Hand-built: a gang of a team below its entitlement waits behind another team's whole
    cluster of runs until they pass their minimum runtime; both paths evict the same two
    runs at the same moment, and the other team keeps its entitlement."""
    burst = [
        TraceJob(f"b{i:02d}", submit_time=0.0, duration=12 * HOUR, gpus=8, project="p1")
        for i in range(4)
    ]
    gang = TraceJob("gang", submit_time=60.0, duration=HOUR, gpus=16, project="p0")
    trace = Trace([*burst, gang], "canonical", projects=["p0", "p1"])
    tree = Budget("org", 100.0, [Budget("p0", 50.0), Budget("p1", 50.0)])

    reference = recorded_orders(trace, tree, 32, "fairshare", incremental=False)
    incremental = recorded_orders(trace, tree, 32, "fairshare", incremental=True)

    assert incremental == reference
    gang_start = [c for c in reference if any(s[0] == "gang" for s in c[1])]
    assert gang_start, "the gang never started"
    evicted = {p[0] for p in gang_start[0][2]}
    # Two of p1's four whole-node runs make room for p0's 16 GPUs (p1 keeps its 16 entitled).
    assert len(evicted) == 2 and evicted <= {b.id for b in burst}


def test_a_start_that_reorders_the_guarantee_makes_the_next_cycle_walk():
    """Hand-built: alpha (8 GPUs entitled, 4 held) comes before beta (16, 9 held) among the
    teams below their entitlement. In one walk alpha's debug job takes the one free GPU
    (5 of 8 now, a larger part than beta's 9 of 16) and its gang, blocked past its bound,
    holds n2 and n3; beta's ``eval`` can reclaim 4 GPUs from gamma only on n2, so it waits.
    The walk started work and failed only after that start, but the start reordered the
    guarantee: beta now goes first, before the gang holds n2. The next cycle, with only a
    minute passed, must walk and start ``eval`` on both paths."""
    hour = 3600.0
    tree = BudgetNode(
        "root", 100, [BudgetNode("alpha", 25), BudgetNode("beta", 50), BudgetNode("gamma", 25)]
    )
    now = 100 * hour
    results = {}
    for incremental in (True, False):
        sched = Scheduler(
            [Node(f"n{i}", GPUS_PER_NODE) for i in range(4)],
            tree,
            policy=make_policy("fairshare"),
            incremental=incremental,
        )
        # Recent (protected) runs on n0 and n1, gamma's old ones on n1 to n3.
        for wid, project, gpus, node, started in (
            ("a-run", "alpha", 4, "n0", now - 600),
            ("b-run1", "beta", 4, "n0", now - 600),
            ("b-run2", "beta", 5, "n1", now - 600),
            ("c1", "gamma", 3, "n1", 0.0),
            ("c2", "gamma", 4, "n2", 0.0),
            ("c3", "gamma", 4, "n2", 0.0),
            ("c4", "gamma", 7, "n3", 0.0),
        ):
            sched.add_running(Workload(wid, project, gpus, 0.0, hour), {node: gpus}, started)
        sched.submit(Workload("debug", "alpha", 1, now - 60, 900.0))
        sched.submit(Workload("gang", "alpha", 16, 1.0, hour, nodes=2, blocked_since=2.0))
        sched.submit(Workload("eval", "beta", 4, 1.0, hour))
        usage = {"gamma": 1e7}
        first = sched.cycle(now, usage)
        second = sched.cycle(now + 60, usage)
        results[incremental] = (cycle_orders(first), cycle_orders(second))

    assert results[True] == results[False]
    (first_starts, first_preempted), (second_starts, second_preempted) = results[True]
    assert [s[0] for s in first_starts] == ["debug"] and first_preempted == []
    assert [s[0] for s in second_starts] == ["eval"]
    assert [p[0] for p in second_preempted] in (["c2"], ["c3"])


def test_a_slice_of_the_philly_trace_takes_the_same_decisions_either_way():
    """Real work at over-demand exercises what small random traces rarely reach: a failed
    search retried only where something changed for it (a team's room grew, a workload
    passed its minimum runtime). 6,000 Philly jobs on 128 GPUs: every cycle's orders equal
    the full recomputation's."""
    from scheduler.simulator import load_budgets, load_trace
    from scheduler.traces import PHILLY_BUDGETS, PHILLY_JOBS

    trace = load_trace(PHILLY_JOBS, "philly").head(6000)
    tree = load_budgets(PHILLY_BUDGETS, trace.jobs)

    reference = recorded_orders(trace, tree, 128, "fairshare", incremental=False)
    incremental = recorded_orders(trace, tree, 128, "fairshare", incremental=True)

    assert sum(len(preempted) for _, _, preempted in reference) > 0
    assert incremental == reference
    assert (
        recorded_orders(trace, tree, 128, "fairshare", incremental=True, explain=True) == reference
    )


def test_what_the_engine_keeps_between_cycles_lets_finished_work_go():
    """The node log a failed search retries from lives as long as the scheduler; an entry
    made because a workload passed its minimum runtime names that workload. Once the
    workload has finished, nothing the scheduler keeps may still hold it: over a long
    replay (a million jobs) that was a quarter of the memory."""
    from scheduler.engine import Node, Workload

    sched = Scheduler([Node("n0", 8)], None)
    sched.submit(Workload("w", "p", 2, 0.0, 600.0))
    assert [s.workload_id for s in sched.cycle(0.0, {}).starts] == ["w"]
    sched.cycle(700.0, {})  # past its 10-minute minimum: logged as newly preemptible
    job = sched._run["w"]
    sched.finish("w")
    sched.cycle(800.0, {})
    gc.collect()
    holders = [r for r in gc.get_referrers(job) if not inspect.isframe(r)]
    assert holders == []


def test_a_start_that_grows_a_teams_room_makes_the_next_cycle_look_again():
    """Hand-built: a start can open a victim for a head the same walk already tried, by
    growing its team's room above its entitlement (that team's older runs become
    reclaimable), so a cycle after a walk that started work must look again even when
    nothing else changed. alpha (7 of its 12 GPUs) waits for 5 GPUs on one node and holds
    n1; beta holds exactly its 12, so nothing of beta's may go (and its 8-GPU job fits
    nowhere). beta then submits 2 GPUs more, which start on n2. One minute later, with
    nothing else changed and the same order, both paths reclaim one of beta's 2-GPU runs
    for alpha."""
    from scheduler.engine import PolicyParams
    from tests.engine.conftest import build_nodes, build_workload
    from tests.engine.preemption_world import LATER, OVER, T0, halves, run

    def cycles(incremental: bool) -> list[tuple[list, list]]:
        sched = Scheduler(
            build_nodes(3),
            halves(),
            policy="fairshare",
            params=PolicyParams(),
            incremental=incremental,
        )
        run(sched, "beta-whole", "beta", {"n0": 8})
        run(sched, "beta-a", "beta", {"n1": 2})
        run(sched, "beta-b", "beta", {"n1": 2})
        run(sched, "alpha-small", "alpha", {"n1": 1})
        run(sched, "alpha-big", "alpha", {"n2": 6})
        sched.submit(build_workload("alpha-five", "alpha", 5, submit=T0, min_runtime=2 * HOUR))
        # Keeps beta in the order after beta-two starts: nowhere to go, nothing to reclaim.
        sched.submit(build_workload("beta-eight", "beta", 8, submit=T0, min_runtime=2 * HOUR))
        out = []
        for now in (LATER - 120.0, LATER, LATER + 60.0):
            if now == LATER:
                sched.submit(
                    build_workload("beta-two", "beta", 2, submit=now, min_runtime=2 * HOUR)
                )
            result = sched.cycle(now, OVER)
            out.append(
                (
                    sorted(s.workload_id for s in result.starts),
                    sorted(p.workload_id for p in result.preemptions),
                )
            )
        return out

    reference = cycles(incremental=False)
    assert reference[:2] == [([], []), (["beta-two"], [])]
    starts, preempted = reference[2]
    assert starts == ["alpha-five"] and len(preempted) == 1 and preempted[0] in {"beta-a", "beta-b"}
    assert cycles(incremental=True) == reference


def test_a_step_past_the_entitlement_is_retried_where_a_grown_room_opens_a_victim():
    """Hand-built: a single-node workload that alone would take its team past its
    entitlement reclaims one step once past the hold bound. When that failed for want of a
    victim, the retry looks again where something changed: nodes logged since, and the
    nodes of a team whose room above its entitlement grew (there, old runs become
    victims although nothing on their node changed).

    Eight nodes of 8 GPUs; alpha and beta are owed 16 each, gamma 32 (its runs are all
    recent, so protected). alpha runs 13 and waits for 4 GPUs on one node: n1 has 3 free
    beside two 1-GPU runs of beta, but beta runs exactly its 16, so the step fails. Then a
    1-GPU run of gamma ends on n3 and beta's new 1-GPU job starts there (beta ranks first
    in the window): beta runs 17, one above its entitlement, so one of its runs on n1 may
    go and alpha's job starts on n1. Both paths decide the same."""
    from tests.engine.conftest import budget, build_nodes, build_workload, leaf
    from tests.engine.preemption_world import LATER, run

    recent = LATER - 30 * 60.0
    usage = {"alpha": 500_000.0, "beta": 0.0, "gamma": 0.0}  # beta ranks before alpha

    def cycles(incremental: bool) -> list[tuple[list, list]]:
        tree = budget("root", 100, leaf("alpha", 25), leaf("beta", 25), leaf("gamma", 50))
        sched = Scheduler(build_nodes(8), tree, policy="fairshare", incremental=incremental)
        run(sched, "gamma-0", "gamma", {"n0": 8}, start=recent)
        run(sched, "beta-a", "beta", {"n1": 1})
        run(sched, "beta-b", "beta", {"n1": 1})
        run(sched, "alpha-x", "alpha", {"n1": 3})
        run(sched, "beta-whole", "beta", {"n2": 8})
        run(sched, "gamma-3", "gamma", {"n3": 7}, start=recent)
        run(sched, "gamma-s", "gamma", {"n3": 1}, start=recent)
        run(sched, "beta-w2", "beta", {"n4": 6})
        run(sched, "gamma-4", "gamma", {"n4": 2}, start=recent)
        run(sched, "alpha-big", "alpha", {"n5": 8})
        run(sched, "alpha-c", "alpha", {"n6": 2})
        run(sched, "gamma-6", "gamma", {"n6": 6}, start=recent)
        run(sched, "gamma-7", "gamma", {"n7": 8}, start=recent)
        sched.submit(build_workload("alpha-four", "alpha", 4, submit=LATER, min_runtime=7200))
        out = []
        # blocked and holding n1; past the 30-minute bound (the step fails); then beta grows
        for now in (LATER, LATER + 31 * 60.0, LATER + 40 * 60.0):
            if now == LATER + 40 * 60.0:
                sched.finish("gamma-s")
                sched.submit(build_workload("beta-one", "beta", 1, submit=now, min_runtime=7200))
            result = sched.cycle(now, usage)
            out.append(
                (
                    sorted((s.workload_id, sorted(s.placement)) for s in result.starts),
                    sorted(p.workload_id for p in result.preemptions),
                )
            )
        return out

    reference = cycles(incremental=False)
    assert reference[:2] == [([], []), ([], [])]
    starts, preempted = reference[2]
    assert starts == [("alpha-four", ["n1"]), ("beta-one", ["n3"])]
    assert len(preempted) == 1 and preempted[0] in {"beta-a", "beta-b"}
    assert cycles(incremental=True) == reference
