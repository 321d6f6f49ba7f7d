"""The stateful scheduler (stub interface; the real cycle lands in the next commits)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.engine.model import (
    BudgetNode,
    CycleResult,
    Node,
    NodeState,
    PolicyParams,
    RunningWorkload,
    Workload,
)
from scheduler.engine.policies import Policy, make_policy


class Scheduler:
    """Cluster state plus a policy; ``cycle`` turns them into orders."""

    def __init__(
        self,
        nodes: Iterable[Node],
        budget_root: BudgetNode | None,
        policy: Policy | None = None,
        params: PolicyParams | None = None,
    ) -> None:
        self.policy = policy or make_policy("fairshare")
        self.params = params or PolicyParams()
        self.nodes = {n.name: n for n in nodes}
        self.budget_root = budget_root
        self.running: dict[str, RunningWorkload] = {}
        self._pending: dict[str, Workload] = {}

    def submit(self, workload: Workload) -> None:
        """Add a new (or requeued) pending workload."""
        self._pending[workload.id] = workload

    def add_running(self, workload: Workload, placement: dict[str, int], start_time: float) -> None:
        """Record a workload that is already running (live loop rebuilding its state)."""
        self.running[workload.id] = RunningWorkload(workload, dict(placement), start_time)

    def finish(self, workload_id: str) -> None:
        """A running workload ended by itself: free its GPUs."""
        self.running.pop(workload_id, None)

    def cancel(self, workload_id: str) -> None:
        """Remove a pending or running workload."""
        self.running.pop(workload_id, None)
        self._pending.pop(workload_id, None)

    def set_node_state(self, node_name: str, state: NodeState, *, force: bool = False) -> None:
        """Mark a node healthy, draining (``force``: evict at once), drained or down."""
        node = self.nodes[node_name]
        self.nodes[node_name] = Node(node.name, node.gpus, state)

    def cycle(self, now: float, usage: Mapping[str, float], explain: bool = False) -> CycleResult:
        """Run one scheduling cycle at ``now`` (stub: decides nothing yet)."""
        return CycleResult()

    def pending_count(self) -> int:
        """How many workloads are pending."""
        return len(self._pending)

    def free_gpus(self) -> int:
        """GPUs free on healthy nodes."""
        used: dict[str, int] = {}
        for rec in self.running.values():
            for name, gpus in rec.placement.items():
                used[name] = used.get(name, 0) + gpus
        return sum(
            n.gpus - used.get(n.name, 0)
            for n in self.nodes.values()
            if n.state == NodeState.HEALTHY
        )
