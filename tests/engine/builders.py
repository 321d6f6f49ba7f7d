"""Small builders for engine tests: clusters, trees and workloads with readable defaults."""

from __future__ import annotations

from scheduler.engine import BudgetNode, Node, PolicyParams, Scheduler, Workload

HOUR = 3600.0
MINUTE = 60.0


def nodes(count: int, gpus: int = 8, prefix: str = "n") -> list[Node]:
    """``count`` nodes named n0, n1, ... with ``gpus`` GPUs each."""
    return [Node(f"{prefix}{i}", gpus) for i in range(count)]


def flat_tree(**shares: float) -> BudgetNode:
    """An organization whose projects hang directly under the root."""
    return BudgetNode("org", 100.0, [BudgetNode(name, share) for name, share in shares.items()])


def work(
    wid: str,
    project: str,
    gpus: int = 1,
    *,
    submit: float = 0.0,
    min_runtime: float = 2 * HOUR,
    resumable: bool = True,
    priority: int = 0,
    nodes: int = 1,
) -> Workload:
    """A workload with the defaults of a training run (2 h minimum runtime)."""
    return Workload(wid, project, gpus, submit, min_runtime, resumable, priority, nodes)


def scheduler(
    node_list: list[Node], tree: BudgetNode | None, policy: str = "fairshare", **params
) -> Scheduler:
    """A scheduler with ``PolicyParams`` overridden by keyword."""
    return Scheduler(node_list, tree, policy=policy, params=PolicyParams(**params))
