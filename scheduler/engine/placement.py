"""Where a workload can go: per-node bookkeeping and the free-capacity index.

Single-node workloads bin-pack onto the fullest schedulable node that fits (ties by node
name); gangs take whole empty nodes, all or nothing. The index keeps schedulable nodes in
buckets by free GPUs, each bucket sorted by node position (= name order), so finding the
fullest fit costs a few list probes instead of a scan of the cluster.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Container, Iterable

from scheduler.engine.model import Node, NodeState


class NodeRec:
    """Mutable state of one node: capacity, health, who runs on it, and for how many GPUs."""

    __slots__ = (
        "bucket",
        "busy_until",
        "exclusive",
        "force",
        "free",
        "gpus",
        "hard",
        "idx",
        "in_empty",
        "name",
        "running",
        "state",
    )

    def __init__(self, node: Node, idx: int) -> None:
        self.name = node.name
        self.idx = idx
        self.gpus = node.gpus
        self.state = node.state
        self.free = node.gpus
        # workload id -> GPUs it holds here; insertion order is the (deterministic) call order.
        self.running: dict[str, int] = {}
        self.force = False
        # A gang owns its nodes whole: nothing else lands there even if GPUs are left over.
        self.exclusive: str | None = None
        self.bucket = -1  # the free-GPU bucket the node sits in, -1 when not schedulable
        self.in_empty = False
        # When the last protected workload here may be preempted (None: not known yet);
        # kept by the walk, forgotten whenever the node's work changes.
        self.busy_until: float | None = None
        # Workloads here that no clearing of whole nodes may evict (protected charged work,
        # and gangs, which are never split): kept by the scheduler.
        self.hard = 0

    @property
    def schedulable(self) -> bool:
        """True when new work may land here: healthy and not owned by a gang."""
        return self.state == NodeState.HEALTHY and self.exclusive is None


def split_gang(gpus: int, nodes: int) -> list[int]:
    """GPUs per node for a gang: as even as possible, the larger shares first."""
    base, extra = divmod(gpus, nodes)
    return [base + 1 if i < extra else base for i in range(nodes)]


class Capacity:
    """The free-capacity index over the cluster's nodes (sorted by name)."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        ordered = sorted(nodes, key=lambda n: n.name)
        names = [n.name for n in ordered]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")
        for n in ordered:
            if n.gpus < 1:
                raise ValueError(f"node {n.name!r}: gpus must be at least 1")
        self.nodes: list[NodeRec] = [NodeRec(n, i) for i, n in enumerate(ordered)]
        self.by_name: dict[str, NodeRec] = {n.name: n for n in self.nodes}
        self.max_gpus = max((n.gpus for n in self.nodes), default=0)
        # buckets[f]: positions of schedulable nodes with exactly f free GPUs (f >= 1).
        self.buckets: list[list[int]] = [[] for _ in range(self.max_gpus + 1)]
        # empty: positions of schedulable nodes with nothing running (gang candidates).
        self.empty: list[int] = []
        self.free_total = 0  # free GPUs on schedulable nodes
        self._healthy: int | None = None
        self._healthy_nodes = 0
        # Positions of the nodes re-filed since a reader last cleared it (with repeats; it
        # stops growing past the number of nodes: a reader then looks at every node).
        self.touched: list[int] = []
        for rec in self.nodes:
            self.refresh(rec)

    def refresh(self, rec: NodeRec) -> None:
        """Re-file ``rec`` after its free GPUs, running set or state changed."""
        if len(self.touched) <= len(self.nodes):
            self.touched.append(rec.idx)
        want = rec.free if rec.schedulable and rec.free > 0 else -1
        if want != rec.bucket:
            if rec.bucket > 0:
                bucket = self.buckets[rec.bucket]
                del bucket[bisect_left(bucket, rec.idx)]
                self.free_total -= rec.bucket
            if want > 0:
                insort(self.buckets[want], rec.idx)
                self.free_total += want
            rec.bucket = want
        empty = rec.schedulable and not rec.running
        if empty != rec.in_empty:
            if empty:
                insort(self.empty, rec.idx)
            else:
                del self.empty[bisect_left(self.empty, rec.idx)]
            rec.in_empty = empty

    def allocate(self, rec: NodeRec, workload_id: str, gpus: int, exclusive: bool = False) -> None:
        """Record ``gpus`` GPUs of ``rec`` as held by ``workload_id`` (a gang: ``exclusive``)."""
        if gpus > rec.free:
            raise ValueError(
                f"node {rec.name!r}: {gpus} GPUs asked for {workload_id!r}, {rec.free} free"
            )
        if rec.exclusive is not None:
            raise ValueError(f"node {rec.name!r} belongs whole to gang {rec.exclusive!r}")
        if exclusive and rec.running:
            raise ValueError(f"node {rec.name!r}: a gang needs it whole but it is in use")
        rec.running[workload_id] = rec.running.get(workload_id, 0) + gpus
        rec.free -= gpus
        rec.busy_until = None
        if exclusive:
            rec.exclusive = workload_id
        self.refresh(rec)

    def release(self, rec: NodeRec, workload_id: str) -> None:
        """Give back whatever ``workload_id`` held on ``rec``."""
        gpus = rec.running.pop(workload_id, 0)
        rec.free += gpus
        rec.busy_until = None
        if rec.exclusive == workload_id:
            rec.exclusive = None
        self.refresh(rec)

    def fullest_fit(self, gpus: int, skip: Container[int]) -> NodeRec | None:
        """The schedulable node with the fewest free GPUs that still fits ``gpus``."""
        if self.free_total < gpus:
            return None  # a full cluster answers at once (over-demand: most asks)
        buckets = self.buckets
        for free in range(max(gpus, 1), self.max_gpus + 1):
            for idx in buckets[free]:
                if idx not in skip:
                    return self.nodes[idx]
        return None

    def whole_nodes(self, count: int, per_node: int, skip: Container[int]) -> list[NodeRec]:
        """Up to ``count`` empty schedulable nodes able to hold ``per_node`` GPUs, by name."""
        found: list[NodeRec] = []
        for idx in self.empty:
            rec = self.nodes[idx]
            if idx in skip or rec.gpus < per_node:
                continue
            found.append(rec)
            if len(found) == count:
                break
        return found

    def largest_free(self, skip: Container[int]) -> int:
        """The most free GPUs on any single schedulable node outside ``skip``."""
        if not self.free_total:
            return 0
        for free in range(self.max_gpus, 0, -1):
            for idx in self.buckets[free]:
                if idx not in skip:
                    return free
        return 0

    def most_free_node(self, max_gpus: int, skip: Container[int]) -> NodeRec | None:
        """The node with the most free GPUs (below ``max_gpus``), first by name."""
        if not self.free_total:
            return None
        for free in range(min(max_gpus, self.max_gpus + 1) - 1, 0, -1):
            for idx in self.buckets[free]:
                if idx not in skip:
                    return self.nodes[idx]
        return None

    def healthy_gpus(self) -> int:
        """GPUs on healthy nodes (what entitlement is computed from); cached per state change."""
        if self._healthy is None:
            healthy = [n for n in self.nodes if n.state == NodeState.HEALTHY]
            self._healthy = sum(n.gpus for n in healthy)
            self._healthy_nodes = len(healthy)
        return self._healthy

    def state_changed(self) -> None:
        """Forget cached health totals (a node changed state)."""
        self._healthy = None

    def healthy_nodes(self) -> int:
        """How many nodes are healthy (cached like ``healthy_gpus``)."""
        self.healthy_gpus()
        return self._healthy_nodes
