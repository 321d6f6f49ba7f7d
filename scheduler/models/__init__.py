"""The live scheduler's records: nodes and their agents, workloads, runs, orders, the usage
ledger, its hourly rollup and the record of each scheduling cycle.

State changes go through ``scheduler.services`` (compare-and-set on ``state``), never through
free-form field writes. ``UsageRecord`` and ``EntitlementRecord`` are append-only ledgers with
natural-key unique constraints so a retried task cannot charge twice; ``UsageHour`` is a cache
rebuilt from them by ``manage.py rebuild_usage``.

One module per subject; every model is importable from here, as Django and the rest of the
code expect.
"""

from scheduler.models.background_jobs import (
    BackgroundJob,
    SimulationJob,
    SimulationJobState,
    WhatIfRun,
)
from scheduler.models.cycles import ProjectStanding, SchedulingCycle, WorkloadChange
from scheduler.models.fields import GPU_SECONDS, MAX_MIN_RUNTIME_SECONDS
from scheduler.models.ledger import AccountingCursor, EntitlementRecord, UsageHour, UsageRecord
from scheduler.models.nodes import Node, NodeAgent
from scheduler.models.orders import Order
from scheduler.models.slurm import SlurmConnection
from scheduler.models.utilization import IdlePolicy, UtilizationDay, UtilizationHour
from scheduler.models.workloads import Run, RunNode, Workload

__all__ = [
    "GPU_SECONDS",
    "MAX_MIN_RUNTIME_SECONDS",
    "AccountingCursor",
    "BackgroundJob",
    "EntitlementRecord",
    "IdlePolicy",
    "Node",
    "NodeAgent",
    "Order",
    "ProjectStanding",
    "Run",
    "RunNode",
    "SchedulingCycle",
    "SimulationJob",
    "SimulationJobState",
    "SlurmConnection",
    "UsageHour",
    "UsageRecord",
    "UtilizationDay",
    "UtilizationHour",
    "WhatIfRun",
    "Workload",
    "WorkloadChange",
]
