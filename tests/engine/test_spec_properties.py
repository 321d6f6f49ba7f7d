"""Property tests of the engine's invariants, for every policy.

Random clusters of 8-GPU nodes (some draining or down), random running and pending work
(gangs included), random budget trees and usage:
- never more GPUs allocated on a node than it has, nothing new on an unhealthy node, nothing
  left on a down node;
- a workload inside its minimum runtime is never preempted (only a forced drain or a node
  that went down may stop it);
- gangs whole or not at all: exactly ``nodes`` nodes, each wholly its own;
- a loan sits on a node held for its holder and ends when the hold allows (``holds``);
- the same input gives the same orders;
- usage is conserved over a replay: the GPU-seconds accounted cycle by cycle equal the sum
  of GPUs x run time of every run the orders describe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.engine import POLICIES, BudgetNode, Node, NodeState, PolicyParams, Workload
from tests.engine.conftest import HOUR, build_scheduler

GPUS_PER_NODE = 8
PROJECTS = ["p0", "p1", "p2", "p3", "px"]
MIN_RUNTIMES = [0.0, 900.0, 3600.0, 7200.0, 8 * HOUR, 10 * HOUR]  # 10 h is capped to 8 h
AGES = [0.0, 60.0, 899.0, 900.0, 3600.0, 7300.0, 30_000.0]
NOW = 100 * HOUR
MAX_MIN_RUNTIME = 8 * HOUR
DEBUG_MIN_RUNTIME = PolicyParams().debug_min_runtime

SPEC = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass
class Scenario:
    """Everything a scheduler is built from, so it can be built twice."""

    states: list[NodeState]
    forced: list[bool]
    tree: BudgetNode
    usage: dict[str, float]
    running: list[tuple[Workload, dict[str, int], float]]
    pending: list[Workload]
    durations: dict[str, float] = field(default_factory=dict)


def shape(node_count: int):
    """(gpus, nodes): single-node 1-8 GPUs, or a gang of 2-3 whole nodes the cluster has."""
    return st.one_of(
        st.tuples(st.integers(1, GPUS_PER_NODE), st.just(1)),
        st.integers(2, min(3, node_count)).map(lambda n: (GPUS_PER_NODE * n, n)),
    )


@st.composite
def trees(draw) -> BudgetNode:
    """A one- or two-level tree over p0-p3 with whole-percent shares; px is never in it."""
    drawn = draw(st.lists(st.integers(1, 9), min_size=4, max_size=4))
    weights = dict(zip(PROJECTS[:4], drawn, strict=True))
    budgeted = PROJECTS[: draw(st.integers(1, 4))]

    def leaves(names):
        total = sum(weights[p] for p in names)
        return [BudgetNode(p, weights[p] * 100 // total) for p in names]

    if draw(st.booleans()) or len(budgeted) < 3:
        return BudgetNode("org", 100, leaves(budgeted))
    cut = draw(st.integers(10, 90))
    return BudgetNode(
        "org",
        100,
        [
            BudgetNode("prog-a", cut, leaves(budgeted[:2])),
            BudgetNode("prog-b", 100 - cut, leaves(budgeted[2:])),
        ],
    )


@st.composite
def scenarios(draw) -> Scenario:
    count = draw(st.integers(2, 5))
    others = st.sampled_from([NodeState.HEALTHY] * 3 + [NodeState.DRAINING, NodeState.DOWN])
    states = [NodeState.HEALTHY, *draw(st.lists(others, min_size=count - 1, max_size=count - 1))]
    forced = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    free = [GPUS_PER_NODE] * count
    running = []
    for i in range(draw(st.integers(0, 8))):
        gpus, nodes = draw(shape(count))
        project = draw(st.sampled_from(PROJECTS))
        w = Workload(
            f"r{i}",
            project,
            gpus,
            submit_time=0.0,
            min_runtime=draw(st.sampled_from(MIN_RUNTIMES)),
            resumable=draw(st.booleans()),
            priority=draw(st.integers(0, 2)),
            nodes=nodes,
        )
        offset = draw(st.integers(0, count - 1))
        order = [(offset + k) % count for k in range(count)]
        if nodes == 1:
            spot = next((k for k in order if free[k] >= gpus), None)
            if spot is None:
                continue
            free[spot] -= gpus
            placement = {f"n{spot}": gpus}
        else:
            empty = [k for k in order if free[k] == GPUS_PER_NODE][:nodes]
            if len(empty) < nodes:
                continue
            for k in empty:
                free[k] = 0
            placement = {f"n{k}": GPUS_PER_NODE for k in empty}
        running.append((w, placement, NOW - draw(st.sampled_from(AGES))))
    pending = []
    for i in range(draw(st.integers(0, 12))):
        gpus, nodes = draw(shape(count))
        pending.append(
            Workload(
                f"q{i}",
                draw(st.sampled_from(PROJECTS)),
                gpus,
                submit_time=float(draw(st.integers(0, 50))) * 60.0,
                min_runtime=draw(st.sampled_from(MIN_RUNTIMES)),
                resumable=draw(st.booleans()),
                priority=draw(st.integers(0, 2)),
                nodes=nodes,
            )
        )
    usage = {p: float(draw(st.integers(0, 50))) * 3600.0 for p in PROJECTS}
    durations = {
        w.id: draw(st.sampled_from([600.0, 1800.0, 5400.0, 20_000.0]))
        for w in [r[0] for r in running] + pending
    }
    return Scenario(states, forced, draw(trees()), usage, running, pending, durations)


def build(sc: Scenario, policy: str):
    nodes = [Node(f"n{k}", GPUS_PER_NODE) for k in range(len(sc.states))]
    sched = build_scheduler(nodes, sc.tree, policy=policy)
    for w, placement, start in sc.running:
        sched.add_running(w, dict(placement), start)
    for w in sc.pending:
        sched.submit(w)
    for k, state in enumerate(sc.states):
        if state != NodeState.HEALTHY:
            sched.set_node_state(f"n{k}", state, force=sc.forced[k])
    return sched


def check_cycle(sched, sc: Scenario, now: float, result, before: dict, pending_before: set):
    """Every invariant of one cycle, given the running set and pending ids just before it."""
    state = {f"n{k}": s for k, s in enumerate(sc.states)}
    forced = {f"n{k}": f for k, f in enumerate(sc.forced)}
    # Allocation never beyond a node's GPUs; nothing left on a down node.
    per_node: dict[str, int] = {}
    for rec in sched.running.values():
        for name, g in rec.placement.items():
            per_node[name] = per_node.get(name, 0) + g
    for name, used in per_node.items():
        assert used <= GPUS_PER_NODE, (name, used)
        assert state[name] != NodeState.DOWN, f"{name} is down but holds {used} GPUs"
    assert sched.allocated_gpus() == sum(per_node.values())
    # Starts: only pending work, only on healthy nodes, whole gangs or nothing.
    for s in result.starts:
        assert s.workload_id in pending_before
        assert s.workload_id in sched.running
        rec = sched.running[s.workload_id]
        assert rec.start_time == now
        assert rec.placement == s.placement
        assert sum(s.placement.values()) == rec.workload.gpus
        for name in s.placement:
            assert state[name] == NodeState.HEALTHY, f"{s.workload_id} started on {name}"
        w = rec.workload
        wanted_nodes = max(w.nodes, -(-w.gpus // GPUS_PER_NODE))
        if wanted_nodes == 1:
            assert len(s.placement) == 1
        else:
            assert len(s.placement) == wanted_nodes
            for name, g in s.placement.items():
                assert g == GPUS_PER_NODE, (s.workload_id, s.placement)
                assert per_node[name] == GPUS_PER_NODE  # and no one else on that node
    # Preemptions: only running work, never inside its minimum runtime except when its
    # node went down or was force-drained.
    for p in result.preemptions:
        assert p.workload_id in before, p
        assert p.workload_id not in sched.running
        assert p.workload_id in sched.pending_ids()
        rec = before[p.workload_id]
        on = set(rec.placement)
        excused = p.kind == "drain" and any(
            state[n] == NodeState.DOWN or (state[n] == NodeState.DRAINING and forced[n]) for n in on
        )
        protected = min(rec.workload.min_runtime, MAX_MIN_RUNTIME)
        if not excused:
            assert now - rec.start_time >= protected, (p, now - rec.start_time, protected)
        if p.kind == "preempt":
            assert p.by is not None and p.by in sched.running
    check_loans(sched, now, result, before)
    # Every gang still running is whole.
    for rec in sched.running.values():
        w = rec.workload
        if w.nodes > 1 or w.gpus > GPUS_PER_NODE:
            assert all(g == GPUS_PER_NODE for g in rec.placement.values())
            assert all(per_node[n] == GPUS_PER_NODE for n in rec.placement)


def check_loans(sched, now: float, result, before: dict) -> None:
    """A run that borrows a held node is on a node held for its holder, and its protection
    ends within the debug class or, on a gang's nodes, by the latest protection of the work
    (borrowers aside) on the gang's held nodes before or during the cycle."""
    held: dict[str, set[str]] = {}
    for idx, holder in sched._last_reserved.items():
        held.setdefault(holder, set()).add(sched.capacity.nodes[idx].name)
    runs = list(before.values()) + list(sched.running.values())
    for s in result.starts:
        if s.loan_for is None:
            continue
        nodes = held.get(s.loan_for, set())
        assert set(s.placement) <= nodes, (s, nodes)
        bound = now + DEBUG_MIN_RUNTIME
        if s.loan_for in sched.pending_ids() and len(nodes) > 1:
            waited = [
                r.protected_until for r in runs if r.loan_for is None and set(r.placement) & nodes
            ]
            bound = max([bound, *waited])
        assert s.protected_until <= bound, (s, bound)


def cycle_checked(sched, sc, now, usage, explain=False):
    before = dict(sched.running)
    pending_before = set(sched.pending_ids())
    result = sched.cycle(now, usage, explain=explain)
    check_cycle(sched, sc, now, result, before, pending_before)
    return result


@pytest.mark.parametrize("policy", sorted(POLICIES))
@SPEC
@given(sc=scenarios())
def test_invariants_hold_over_a_few_cycles(policy, sc):
    sched = build(sc, policy)
    for dt in (0.0, 600.0, 3600.0, 4 * HOUR, 9 * HOUR):
        cycle_checked(sched, sc, NOW + dt, sc.usage)


def signature(result):
    return (
        [(s.workload_id, sorted(s.placement.items()), s.reason) for s in result.starts],
        [(p.workload_id, p.by, p.kind, p.reason) for p in result.preemptions],
        list(result.drained),
        list(result.order),
        sorted(result.reasons.items()),
    )


@pytest.mark.parametrize("policy", sorted(POLICIES))
@SPEC
@given(sc=scenarios())
def test_same_input_gives_the_same_orders(policy, sc):
    runs = []
    for _ in range(2):
        sched = build(sc, policy)
        runs.append(
            [
                signature(sched.cycle(NOW + dt, sc.usage, explain=True))
                for dt in (0.0, 900.0, 3 * HOUR)
            ]
        )
    assert runs[0] == runs[1]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@SPEC
@given(sc=scenarios())
def test_usage_is_conserved_over_a_replay(policy, sc):
    """Replay 6 h in 10-minute steps as a driver would: cycle, account, finish what is done.

    The ledger adds GPUs x step for every running workload after each cycle. Separately,
    each run's interval is taken from the orders (start -> preemption or finish). Both totals
    must agree per project, and the window usage fed back to the engine is the ledger.
    """
    step = 600.0
    sched = build(sc, policy)
    usage = dict(sc.usage)
    ledger: dict[str, float] = {}
    opened: dict[str, float] = {rec.workload.id: NOW for rec in sched.running.values()}
    done_work: dict[str, float] = {}
    from_orders: dict[str, float] = {}

    def close(wid: str, project: str, gpus: int, t: float):
        from_orders[project] = from_orders.get(project, 0.0) + gpus * (t - opened.pop(wid))

    now = NOW
    for _ in range(36):
        before = dict(sched.running)
        result = cycle_checked(sched, sc, now, usage)
        for p in result.preemptions:
            w = before[p.workload_id].workload
            close(w.id, w.project, w.gpus, now)
        for s in result.starts:
            opened[s.workload_id] = now
        # Time passes: charge every running workload for this step.
        for rec in sched.running.values():
            w = rec.workload
            ledger[w.project] = ledger.get(w.project, 0.0) + w.gpus * step
            if w.min_runtime > 0:
                usage[w.project] = usage.get(w.project, 0.0) + w.gpus * step
            done_work[w.id] = done_work.get(w.id, 0.0) + step
        now += step
        for wid in sorted(sched.running):
            if done_work.get(wid, 0.0) >= sc.durations[wid]:
                w = sched.running[wid].workload
                sched.finish(wid)
                close(wid, w.project, w.gpus, now)
    for wid in list(opened):
        w = sched.running[wid].workload
        close(wid, w.project, w.gpus, now)
    projects = set(ledger) | set(from_orders)
    for project in projects:
        assert ledger.get(project, 0.0) == pytest.approx(from_orders.get(project, 0.0)), project
