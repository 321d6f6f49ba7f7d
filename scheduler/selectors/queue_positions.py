"""Where a pending workload stands in its cluster's fair-share order: position 1 is next.

Each cycle stores queue keys that sort like its order (``scheduler.services.queue_keys``);
the position is the count of the cluster's pending workloads with a smaller key, plus one. A
workload submitted since the last cycle has no key and no position yet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from scheduler.choices import WorkloadState
from scheduler.models import Workload

# Up to this many workloads of one cluster are counted one by one (an index range each);
# more, and the cluster's whole pending order is read once.
_COUNTED_ONE_BY_ONE = 4


def queue_positions(workloads: Iterable[Workload]) -> dict[int, int]:
    """Workload id -> position for those of ``workloads`` that are pending with a queue key."""
    by_cluster: dict[int, list[Workload]] = defaultdict(list)
    for workload in workloads:
        if workload.state == WorkloadState.PENDING and workload.queue_key is not None:
            by_cluster[workload.cluster_id].append(workload)
    positions: dict[int, int] = {}
    for cluster_id, placed in by_cluster.items():
        queue = Workload.objects.filter(
            cluster_id=cluster_id, state=WorkloadState.PENDING, queue_key__isnull=False
        )
        if len(placed) <= _COUNTED_ONE_BY_ONE:
            for workload in placed:
                positions[workload.id] = queue.filter(queue_key__lt=workload.queue_key).count() + 1
            continue
        wanted = {workload.id for workload in placed}
        ordered = queue.order_by("queue_key").values_list("id", flat=True)
        positions.update(
            (workload_id, place)
            for place, workload_id in enumerate(ordered.iterator(chunk_size=5_000), start=1)
            if workload_id in wanted
        )
    return positions


def queue_positions_attach(workloads: Iterable[Workload]) -> None:
    """Set ``queue_position`` (None when it has none) on each of ``workloads``."""
    workloads = list(workloads)
    positions = queue_positions(workloads)
    for workload in workloads:
        workload.queue_position = positions.get(workload.id)
