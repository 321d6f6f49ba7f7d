"""Benchmarks of one scheduling cycle at production scale.

A synthetic cluster with a fixed seed: 1,024 nodes x 8 GPUs, 200 projects in a 3-level
budget tree (1 organization, 10 programs, 20 projects each), 4,000 running and 10,000 pending
workloads. Targets: median <= 50 ms per cycle, <= 8 ms for the steady state; at KAI
Scheduler's published scale (4,096 nodes, 50,000 pending) <= 50 ms. Nothing here asserts on
time.

Run: ``.venv/bin/python -m pytest tests/bench/test_bench_engine.py -o addopts="" -q``
"""

from __future__ import annotations

import random

import pytest

from scheduler.engine import BudgetNode, Node, PolicyParams, Scheduler, Workload

SEED = 20260411
NODES = 1024
GPUS_PER_NODE = 8
PROGRAMS = 10
PROJECTS_PER_PROGRAM = 20
RUNNING = 4000
PENDING = 10_000
NOW = 30 * 86400.0
TARGET_SECONDS = 0.05
STEADY_TARGET_SECONDS = 0.008

# (gpus, weight): mostly small work, a few whole-node runs and 2-node gangs.
SHAPES = [(1, 62), (2, 22), (4, 11), (8, 45 / 10), (16, 5 / 10)]


def _shares(rng: random.Random, n: int) -> list[float]:
    raw = [rng.uniform(0.5, 2.0) for _ in range(n)]
    total = sum(raw)
    # Siblings sum to 95 %: a little is left unallocated, as in real trees.
    return [95.0 * r / total for r in raw]


def _tree(rng: random.Random) -> tuple[BudgetNode, list[str]]:
    programs, projects = [], []
    for p, pshare in enumerate(_shares(rng, PROGRAMS)):
        children = []
        for j, share in enumerate(_shares(rng, PROJECTS_PER_PROGRAM)):
            name = f"p{p:02d}-{j:02d}"
            projects.append(name)
            children.append(BudgetNode(name, share))
        programs.append(BudgetNode(f"program{p:02d}", pshare, children))
    return BudgetNode("org", 100.0, programs), projects


def _workload(rng: random.Random, wid: str, projects: list[str], submit: float) -> Workload:
    gpus = rng.choices([s for s, _ in SHAPES], weights=[w for _, w in SHAPES])[0]
    kind = rng.random()
    min_runtime = 0.0 if kind < 0.1 else 900.0 if kind < 0.3 else 7200.0
    return Workload(
        id=wid,
        project=rng.choice(projects),
        gpus=gpus,
        submit_time=submit,
        min_runtime=min_runtime,
        resumable=rng.random() < 0.7,
        priority=rng.choice([0, 0, 0, 1]),
        nodes=max(1, gpus // GPUS_PER_NODE),
    )


def build(
    seed: int = SEED,
    policy: str = "fairshare",
    nodes_count: int = NODES,
    running_count: int = RUNNING,
    pending_count: int = PENDING,
) -> tuple[Scheduler, dict, random.Random]:
    """The synthetic cluster (by default 4,000 running, 10,000 pending), usage per project."""
    rng = random.Random(seed)
    root, projects = _tree(rng)
    nodes = [Node(f"node{i:05d}", GPUS_PER_NODE) for i in range(nodes_count)]
    sched = Scheduler(nodes, root, policy=policy, params=PolicyParams())
    running = [
        _workload(rng, f"r{i:05d}", projects, NOW - rng.uniform(3600, 86400))
        for i in range(running_count)
    ]
    # First-fit, largest first, so that gangs find whole nodes.
    free = [GPUS_PER_NODE] * nodes_count
    cursor = 0  # nodes before it are full enough that first-fit skips them
    for w in sorted(running, key=lambda w: (-w.gpus, w.id)):
        if w.nodes > 1:
            idle = [i for i in range(nodes_count) if free[i] == GPUS_PER_NODE][: w.nodes]
            if len(idle) < w.nodes:
                continue
            placement = {nodes[i].name: GPUS_PER_NODE for i in idle}
        else:
            while cursor < nodes_count and free[cursor] == 0:
                cursor += 1
            spot = next((i for i in range(cursor, nodes_count) if free[i] >= w.gpus), None)
            if spot is None:
                continue
            placement = {nodes[spot].name: w.gpus}
        for name, gpus in placement.items():
            free[int(name[4:])] -= gpus
        start = NOW - rng.uniform(0, 8 * 3600)
        sched.add_running(w, placement, max(w.submit_time, start))
    for i in range(pending_count):
        sched.submit(_workload(rng, f"q{i:05d}", projects, NOW - rng.uniform(0, 2 * 86400)))
    usage = {p: rng.lognormvariate(0, 1) * 3600 * 8 * 24 * 7 for p in projects}
    usage.update({f"unbudgeted{i}": 1e5 for i in range(3)})
    return sched, usage, rng


def _describe(benchmark, sched: Scheduler) -> None:
    benchmark.extra_info["target_seconds"] = TARGET_SECONDS
    benchmark.extra_info["seed"] = SEED
    benchmark.extra_info["running"] = len(sched.running)
    benchmark.extra_info["pending"] = sched.pending_count()


@pytest.mark.parametrize("policy", ["fairshare", "quota"])
def test_bench_cycle_first_on_a_fresh_state(benchmark, policy):
    """One cycle on a state the engine has never seen (everything is re-ranked and walked)."""
    state = {}

    def setup():
        sched, usage, _ = build(policy=policy)
        state["sched"] = sched
        return (sched, usage), {}

    def run(sched, usage):
        return sched.cycle(NOW, usage)

    result = benchmark.pedantic(run, setup=setup, rounds=5, iterations=1)
    _describe(benchmark, state["sched"])
    benchmark.extra_info["starts"] = len(result.starts)
    benchmark.extra_info["preemptions"] = len(result.preemptions)


def _steady_state(benchmark, sched: Scheduler, usage: dict, rng: random.Random, rounds: int):
    """Time cycles 30 s apart, each after 10 finishes, 10 submits and 30 s of usage."""
    sched.cycle(NOW, usage)
    clock = {"now": NOW, "n": 0}
    projects = sorted(p for p in usage if p.startswith("p"))

    def setup():
        clock["now"] += 30.0
        for wid in rng.sample(sorted(sched.running), 10):
            sched.finish(wid)
        for _ in range(10):
            clock["n"] += 1
            sched.submit(_workload(rng, f"s{clock['n']:06d}", projects, clock["now"]))
        for project in usage:
            usage[project] += 30.0 * rng.uniform(0, 40)
        return (clock["now"],), {}

    benchmark.pedantic(
        lambda t: sched.cycle(t, usage), setup=setup, rounds=rounds, iterations=1, warmup_rounds=2
    )
    _describe(benchmark, sched)


def test_bench_cycle_steady_state_with_a_few_changes(benchmark):
    """A cycle 30 s after the last one, with 10 finishes and 10 submits in between."""
    _steady_state(benchmark, *build(), rounds=40)
    # The steady state is what a live loop that keeps its state pays every cycle.
    benchmark.extra_info["target_seconds"] = STEADY_TARGET_SECONDS


def test_bench_cycle_when_nothing_changed(benchmark):
    """A cycle right after another with no event in between: must cost next to nothing.

    The synthetic state first rebalances (at most ``max_preemptions_per_cycle`` evictions a
    cycle), so cycles run until one decides nothing; the measured cycles come after that.
    """
    sched, usage, _ = build()
    now = NOW
    for _ in range(400):
        now += 1.0
        result = sched.cycle(now, usage)
        if not result.starts and not result.preemptions:
            break
    benchmark.pedantic(lambda: sched.cycle(now + 1.0, usage), rounds=50, iterations=1)
    _describe(benchmark, sched)


# KAI Scheduler's published scale: 4,096 nodes x 8 GPUs, 50,000 pending (running in the same
# proportion as above: 16,000).
KAI_NODES, KAI_RUNNING, KAI_PENDING = 4096, 16_000, 50_000


def test_bench_cycle_steady_state_at_kai_scale(benchmark):
    """The steady-state cycle of the test above at 4,096 nodes and 50,000 pending."""
    built = build(nodes_count=KAI_NODES, running_count=KAI_RUNNING, pending_count=KAI_PENDING)
    _steady_state(benchmark, *built, rounds=20)
