"""The order in which the next scheduling cycle offers free GPUs to a cluster's projects.

Computed by the engine's own policy view from the live cycle's inputs (the budget tree, the
windowed usage, charged GPUs running now, healthy GPUs), so a page that shows it cannot
disagree with the scheduler: under ``fairshare``, projects running fewer charged GPUs than
their entitlement come first (in Fair Tree order), then every project in Fair Tree order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Sum

from governance.models import Cluster
from scheduler import engine
from scheduler.choices import NodeState, RunLane, WorkloadState
from scheduler.engine.fairtree import BudgetTree
from scheduler.engine.policies import CycleInputs
from scheduler.models import Node, Run
from scheduler.selectors.budget import ClusterBudget


@dataclass(frozen=True)
class OfferOrder:
    """Where each project stands for the next cycle.

    ``order``: project ids, first offered first (projects below their entitlement lead).
    ``below``: the projects below their entitlement now, offered free GPUs before anyone
    else up to it. ``entitled``: whole GPUs each budgeted project is entitled to on
    ``healthy_gpus``; ``running``: charged GPUs each project runs now (stopping runs left
    out, as the cycle leaves them out).
    """

    order: list[int]
    below: frozenset[int]
    entitled: dict[int, int]
    running: dict[int, int]
    healthy_gpus: int


def charged_gpus_running(*, cluster: Cluster) -> dict[int, int]:
    """Charged GPUs each project runs on ``cluster`` now, as the next cycle counts them."""
    rows = (
        Run.objects.filter(
            cluster=cluster,
            ended_at__isnull=True,
            stop_requested_at__isnull=True,
            lane=RunLane.CHARGED,
            workload__state=WorkloadState.RUNNING,
        )
        .values_list("project_id")
        .annotate(gpus=Sum("gpus"))
    )
    return {project_id: int(gpus) for project_id, gpus in rows}


def offer_order(
    *,
    cluster: Cluster,
    budget: ClusterBudget,
    usage: dict[int, float],
    project_ids: list[int],
    now: datetime,
) -> OfferOrder:
    """The next cycle's offer order for ``project_ids`` under ``SCHEDULER_POLICY``.

    ``budget`` and ``usage`` (charged GPU-seconds over the window, by project id) are the
    ones the caller already read for ``now``. Two queries (runs and healthy GPUs).
    """
    running = charged_gpus_running(cluster=cluster)
    healthy = (
        Node.objects.filter(cluster=cluster, state=NodeState.HEALTHY).aggregate(g=Sum("gpus"))["g"]
        or 0
    )
    key = budget.key
    by_key = {key(pid): pid for pid in project_ids}
    tree = BudgetTree(budget.root)
    charged = {key(pid): gpus for pid, gpus in running.items()}
    inputs = CycleInputs(
        tree=tree,
        usage={key(pid): seconds for pid, seconds in usage.items()},
        projects=sorted(by_key),
        allocated=charged,
        charged_allocated=charged,
        evictable={},
        healthy_gpus=int(healthy),
        now=now.timestamp(),
        params=engine.PolicyParams(window_seconds=float(settings.SCHEDULER_WINDOW_SECONDS)),
    )
    view = engine.make_policy(settings.SCHEDULER_POLICY).begin(inputs)
    first = [g for g in view.guaranteed if g in by_key]
    led = set(first)
    rest = [g for g in view.groups if g in by_key and g not in led]
    entitled = tree.entitled_gpus(int(healthy))
    return OfferOrder(
        order=[by_key[g] for g in first + rest],
        below=frozenset(by_key[g] for g in first),
        entitled={pid: entitled[k] for k, pid in by_key.items() if k in entitled},
        running={pid: running.get(pid, 0) for pid in project_ids},
        healthy_gpus=int(healthy),
    )
