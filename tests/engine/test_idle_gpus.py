"""``Scheduler.idle_gpus``: free GPUs by why they are idle, read after a cycle."""

from __future__ import annotations

from scheduler.engine import IdleGpus, Scheduler
from tests.engine.conftest import budget, build_nodes, build_scheduler, build_workload


def _scheduler(nodes: int = 2) -> Scheduler:
    return build_scheduler(build_nodes(nodes), budget("org", 100.0, "p"), "fifo")


def test_a_workload_too_big_for_any_node_leaves_fragments_and_holds_one_node():
    sched = _scheduler()
    sched.submit(build_workload("a", "p", 6))
    sched.submit(build_workload("b", "p", 6))
    sched.cycle(0.0, {})
    sched.submit(build_workload("c", "p", 4, submit=1.0))
    sched.cycle(1.0, {})

    # 2 GPUs free on each node; the blocked 4-GPU workload holds one of them.
    assert sched.idle_gpus() == IdleGpus(
        held=2, gang_owned=0, fragmented=2, unused=0, pending_gpus=4
    )


def test_gpus_a_gang_leaves_on_its_nodes_are_gang_owned():
    sched = _scheduler(3)
    sched.submit(build_workload("gang", "p", 12, nodes=2))
    sched.cycle(0.0, {})

    # 6 of 8 GPUs on each of two nodes; nothing pending, the third node empty.
    assert sched.idle_gpus() == IdleGpus(
        held=0, gang_owned=4, fragmented=8, unused=0, pending_gpus=0
    )


def test_pending_totals_follow_submits_starts_and_cancels():
    sched = _scheduler(2)
    sched.submit(build_workload("a", "p", 8))
    sched.submit(build_workload("b", "p", 8))
    sched.submit(build_workload("c", "p", 3, submit=1.0))
    sched.submit(build_workload("d", "p", 16, nodes=2, submit=1.0))
    assert sched.idle_gpus().pending_gpus == 35
    sched.cancel("d")
    sched.cycle(1.0, {})  # "a" and "b" take both nodes

    assert sched.idle_gpus() == IdleGpus(
        held=0, gang_owned=0, fragmented=0, unused=0, pending_gpus=3
    )
