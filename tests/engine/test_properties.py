"""Property tests: invariants that hold for any cluster, any workload stream, any policy."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.engine import POLICIES, BudgetNode, Node, NodeState, PolicyParams, Scheduler
from scheduler.engine import Workload as W

MIN_RUNTIMES = [0.0, 600.0, 1800.0, 7200.0]

step = st.one_of(
    st.tuples(
        st.just("submit"),
        st.integers(1, 24),  # GPUs
        st.integers(0, 4),  # project index (4 = unbudgeted)
        st.sampled_from(MIN_RUNTIMES),
        st.integers(0, 2),  # priority
        st.booleans(),  # resumable
    ),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("cycle"), st.sampled_from([0.0, 60.0, 600.0, 1800.0, 7200.0])),
    st.tuples(st.just("node"), st.integers(0, 4), st.sampled_from(list(NodeState)), st.booleans()),
)


@st.composite
def scenarios(draw):
    """A cluster, a budget tree, a policy and a stream of driver calls."""
    node_count = draw(st.integers(1, 5))
    gpus_per_node = draw(st.sampled_from([4, 8]))
    shares = draw(st.lists(st.floats(0, 100), min_size=4, max_size=4))
    scale = 100.0 / max(100.0, sum(shares))
    tree = BudgetNode(
        "org",
        100,
        [
            BudgetNode("prog1", 60, [BudgetNode(f"p{i}", shares[i] * scale) for i in (0, 1)]),
            BudgetNode("prog2", 40, [BudgetNode(f"p{i}", shares[i] * scale) for i in (2, 3)]),
        ],
    )
    policy = draw(st.sampled_from(POLICIES))
    steps = draw(st.lists(step, min_size=1, max_size=30))
    usage_seed = draw(st.lists(st.floats(0, 1e6), min_size=5, max_size=5))
    return node_count, gpus_per_node, tree, policy, steps, usage_seed


@dataclass
class Trace:
    """Everything a run decided, for comparing two runs."""

    results: list = field(default_factory=list)


def run(scenario, check: bool = True) -> Trace:
    """Play a scenario through a fresh scheduler, checking invariants after every cycle."""
    node_count, gpn, tree, policy, steps, usage_seed = scenario
    node_list = [Node(f"n{i}", gpn) for i in range(node_count)]
    sched = Scheduler(node_list, tree, policy=policy, params=PolicyParams(gang_reserve_after=600))
    now = 0.0
    trace = Trace()
    forced: set[str] = set()
    states = {n.name: NodeState.HEALTHY for n in node_list}
    for i, action in enumerate(steps):
        kind = action[0]
        if kind == "submit":
            _, gpus, project, min_runtime, priority, resumable = action
            nodes = -(-gpus // gpn) if gpus > gpn else 1
            if nodes > node_count:
                continue
            w = W(f"w{i}", f"p{project}", gpus, now, min_runtime, resumable, priority, nodes)
            sched.submit(w)
        elif kind == "finish":
            running = sorted(sched.running)
            if running:
                sched.finish(running[action[1] % len(running)])
        elif kind == "node":
            _, index, state, force = action
            name = f"n{index % node_count}"
            if state == NodeState.DRAINED and any(
                name in r.placement for r in sched.running.values()
            ):
                continue
            sched.set_node_state(name, state, force=force)
            states[name] = state
            if state == NodeState.DRAINING and force:
                forced.add(name)
            else:
                forced.discard(name)
        else:
            now += action[1]
            usage = {f"p{k}": usage_seed[k] * (1 + i) for k in range(5)}
            before = dict(sched.running)
            explain = i % 2 == 0
            result = sched.cycle(now, usage, explain=explain)
            trace.results.append(result)
            if check:
                _check(sched, result, before, now, gpn, node_count, forced, explain)
            for name in result.drained:
                states[name] = NodeState.DRAINED
    return trace


def _check(sched, result, before, now, gpn, node_count, forced, explain) -> None:
    capacity = {f"n{i}": gpn for i in range(node_count)}
    used = dict.fromkeys(capacity, 0)
    for rec in sched.running.values():
        for name, gpus in rec.placement.items():
            used[name] += gpus
    # Placement never oversubscribes a node.
    assert all(used[n] <= capacity[n] for n in capacity)
    # Never more GPUs allocated than the nodes that may hold work; none on a down node.
    down = {n for n in capacity if sched.node_state(n) == NodeState.DOWN}
    assert all(used[n] == 0 for n in down)
    assert sum(used.values()) <= gpn * (node_count - len(down))
    started = {s.workload_id for s in result.starts}
    for start in result.starts:
        w = sched.running[start.workload_id].workload
        assert sum(start.placement.values()) == w.gpus
        # New work lands only on healthy nodes.
        assert all(sched.node_state(n) == NodeState.HEALTHY for n in start.placement)
        if w.gpus > gpn or w.nodes > 1:
            # A gang starts whole: all its nodes, each of them its own.
            assert len(start.placement) == max(w.nodes, -(-w.gpus // gpn))
            for name in start.placement:
                others = [r for r in sched.running.values() if name in r.placement]
                assert [r.workload.id for r in others] == [w.id]
        else:
            assert len(start.placement) == 1
    for p in result.preemptions:
        rec = before[p.workload_id]
        ran = now - rec.start_time
        protected = min(rec.workload.min_runtime, sched.params.max_min_runtime)
        if p.kind == "preempt":
            # Inside its minimum runtime a workload is never preempted (free lane excepted).
            assert rec.workload.min_runtime == 0 or ran >= protected
            assert p.by in started
        else:
            nodes = set(rec.placement)
            down_or_forced = any(
                sched.node_state(n) == NodeState.DOWN or n in forced for n in nodes
            )
            assert down_or_forced or rec.workload.min_runtime == 0 or ran >= protected
        assert p.workload_id in sched.pending_ids()
        assert p.workload_id not in started
    if explain:
        assert set(result.reasons) == set(sched.pending_ids())
        assert sorted(result.order) == sched.pending_ids()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_hold_for_any_stream_and_policy(scenario):
    run(scenario)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_same_input_gives_the_same_orders(scenario):
    first = run(scenario, check=False)
    second = run(scenario, check=False)
    assert repr(first.results) == repr(second.results)
