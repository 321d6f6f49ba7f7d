"""The scheduling engine: pure Python, no Django, no I/O, deterministic.

State and policy in, orders and reasons out. Both the live loop and the simulator call it.
Its modules load from the native build when there is one for these sources (``native``).
"""

from scheduler.engine.native import extend_path

__path__ = extend_path(__path__, __name__)


from scheduler.engine.model import (
    BudgetNode,
    CycleResult,
    IdleGpus,
    Node,
    NodeState,
    PolicyParams,
    Preemption,
    RunningWorkload,
    Start,
    Workload,
)
from scheduler.engine.policies import POLICIES, Policy, make_policy
from scheduler.engine.state import Scheduler

__all__ = [
    "POLICIES",
    "BudgetNode",
    "CycleResult",
    "IdleGpus",
    "Node",
    "NodeState",
    "Policy",
    "PolicyParams",
    "Preemption",
    "RunningWorkload",
    "Scheduler",
    "Start",
    "Workload",
    "make_policy",
]
