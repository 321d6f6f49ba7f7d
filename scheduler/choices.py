"""Enumerations of the live scheduler, stored as text and guarded by CheckConstraints."""

from django.db import models


class NodeState(models.TextChoices):
    """Health of a node as the scheduler sees it (same names as ``engine.NodeState``)."""

    HEALTHY = "healthy", "Healthy"
    DRAINING = "draining", "Draining"
    DRAINED = "drained", "Drained"
    DOWN = "down", "Down"


# The badge colour of each node state on the pages (classes of static/css/app.css).
NODE_BADGES = {
    NodeState.HEALTHY: "badge-applied",
    NodeState.DRAINING: "badge-submitted",
    NodeState.DRAINED: "badge-approved",
    NodeState.DOWN: "badge-rejected",
}


class NodeStateSource(models.TextChoices):
    """Who put a node in its current state: a heartbeat only revives what the system downed."""

    SYSTEM = "system", "System"
    OPERATOR = "operator", "Operator"
    AGENT = "agent", "Agent"


class WorkloadState(models.TextChoices):
    """Life cycle of a workload.

    pending → running → succeeded | failed | cancelled; running → preempted (a stop was
    ordered, the agent has not confirmed it yet) → pending (requeued with its submit time).
    """

    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    PREEMPTED = "preempted", "Preempted"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# States in which a workload counts as demand (it asks for GPUs).
DEMAND_STATES = (WorkloadState.PENDING, WorkloadState.RUNNING, WorkloadState.PREEMPTED)
FINAL_STATES = (WorkloadState.SUCCEEDED, WorkloadState.FAILED, WorkloadState.CANCELLED)


class RunEndReason(models.TextChoices):
    """Why a run (one start of a workload) ended."""

    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    PREEMPTED = "preempted", "Preempted"
    DRAINED = "drained", "Evicted by a drain"
    NODE_DOWN = "node_down", "Node went down"
    CANCELLED = "cancelled", "Cancelled"


class RunLane(models.TextChoices):
    """How a run is charged: the free lane (minimum runtime 0) is never charged."""

    CHARGED = "charged", "Charged"
    FREE = "free", "Free lane"


class OrderKind(models.TextChoices):
    """What an executor is told to do on one node."""

    START = "start", "Start"
    STOP = "stop", "Stop"


class OrderState(models.TextChoices):
    """Delivery of an order to its node's agent.

    created → delivered (the agent fetched it; fetching again redelivers) → acknowledged.
    ``void``: the order's run ended before the agent took it (node down, cancelled).
    """

    CREATED = "created", "Created"
    DELIVERED = "delivered", "Delivered"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    VOID = "void", "Void"


OPEN_ORDER_STATES = (OrderState.CREATED, OrderState.DELIVERED)


class Charge(models.TextChoices):
    """How a ledger row is charged (see docs/live-loop.md for the burst rule)."""

    BUDGETED = "budgeted", "Budgeted"
    BURST = "burst", "Burst"
    FREE = "free", "Free"


class ExitOutcome(models.TextChoices):
    """What an executor reports when a workload's process ends."""

    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    PREEMPTED = "preempted", "Stopped by a stop order"
