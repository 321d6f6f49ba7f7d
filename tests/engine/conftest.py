"""Shared builders for the engine's spec tests (pure Python: no database, no Django).

Expected values live in the tests themselves; these helpers only assemble inputs.
"""

from __future__ import annotations

from scheduler.engine import (
    BudgetNode,
    CycleResult,
    Node,
    NodeState,
    PolicyParams,
    Scheduler,
    Workload,
    make_policy,
)

HOUR = 3600.0
MINUTE = 60.0


def build_nodes(count: int, gpus: int = 8, prefix: str = "n") -> list[Node]:
    """``count`` healthy nodes named n0, n1, ... with ``gpus`` GPUs each."""
    return [Node(f"{prefix}{i}", gpus) for i in range(count)]


def build_workload(
    wid: str,
    project: str,
    gpus: int,
    *,
    submit: float = 0.0,
    min_runtime: float = HOUR,
    priority: int = 0,
    nodes: int = 1,
    resumable: bool = True,
) -> Workload:
    """A workload with a charged one-hour minimum runtime unless told otherwise."""
    return Workload(
        id=wid,
        project=project,
        gpus=gpus,
        submit_time=submit,
        min_runtime=min_runtime,
        resumable=resumable,
        priority=priority,
        nodes=nodes,
    )


def budget(name: str, share: float, *children: BudgetNode | str) -> BudgetNode:
    """A tree node; a bare string child is a leaf project holding 100 % of this node."""
    kids = [BudgetNode(c, 100.0) if isinstance(c, str) else c for c in children]
    return BudgetNode(name, share, kids)


def leaf(project: str, share: float) -> BudgetNode:
    """A project leaf with ``share`` percent of its parent."""
    return BudgetNode(project, share)


def build_scheduler(
    nodes: list[Node],
    root: BudgetNode | None,
    policy: str = "fairshare",
    **params: float,
) -> Scheduler:
    """A scheduler over ``nodes`` with the named policy and PolicyParams overrides."""
    return Scheduler(nodes, root, policy=make_policy(policy), params=PolicyParams(**params))


def started_ids(result: CycleResult) -> list[str]:
    """Ids of the workloads a cycle started, in order."""
    return [s.workload_id for s in result.starts]


def preempted_ids(result: CycleResult) -> list[str]:
    """Ids of the workloads a cycle preempted or drained, in order."""
    return [p.workload_id for p in result.preemptions]


def placement_of(result: CycleResult, wid: str) -> dict[str, int]:
    """Where a cycle started ``wid`` (KeyError-like AssertionError if it did not)."""
    for s in result.starts:
        if s.workload_id == wid:
            return s.placement
    raise AssertionError(f"{wid} was not started; starts: {started_ids(result)}")


def allocated_per_node(sched: Scheduler) -> dict[str, int]:
    """GPUs held by running workloads on each node, from the scheduler's running set."""
    out: dict[str, int] = {}
    for rec in sched.running.values():
        for name, g in rec.placement.items():
            out[name] = out.get(name, 0) + g
    return out


__all__ = [
    "HOUR",
    "MINUTE",
    "NodeState",
    "allocated_per_node",
    "budget",
    "build_nodes",
    "build_scheduler",
    "build_workload",
    "leaf",
    "placement_of",
    "preempted_ids",
    "started_ids",
]
