"""Serializers of the scheduler API: output shapes, and input shapes checked before services.

Input serializers check types and ranges only; the business rules (GPUs within the cluster,
whole nodes for gangs, minimum runtime 0 to 8 h, launch spec shape, state transitions) are the
services', which answer with ``ValidationError``s naming the field.

One module per subject; every serializer is importable from here.
"""

from scheduler.api.serializers.agent_protocol import (
    AgentAnswerSerializer,
    AgentHeartbeatAnswerSerializer,
    AgentHeartbeatSerializer,
    AgentRegisteredSerializer,
    AgentRegisterSerializer,
    OrderAckSerializer,
    OrderListSerializer,
    OrderSerializer,
    RunExitSerializer,
)
from scheduler.api.serializers.nodes import (
    NodeActionSerializer,
    NodeAgentCreatedSerializer,
    NodeAgentCreateSerializer,
    NodeAgentSerializer,
    NodeSerializer,
)
from scheduler.api.serializers.refs import RefSerializer, object_ref
from scheduler.api.serializers.utilization import (
    IdlePolicySerializer,
    MeasuredDecimalField,
    UtilizationAnswerSerializer,
    UtilizationItemSerializer,
    UtilizationReportSerializer,
)
from scheduler.api.serializers.workloads import (
    ENV_MASK,
    RunSerializer,
    WorkloadBulkResultSerializer,
    WorkloadBulkSubmitSerializer,
    WorkloadDetailSerializer,
    WorkloadSerializer,
    WorkloadSubmitSerializer,
    launch_spec_shown,
)

__all__ = [
    "ENV_MASK",
    "AgentAnswerSerializer",
    "AgentHeartbeatAnswerSerializer",
    "AgentHeartbeatSerializer",
    "AgentRegisterSerializer",
    "AgentRegisteredSerializer",
    "IdlePolicySerializer",
    "MeasuredDecimalField",
    "NodeActionSerializer",
    "NodeAgentCreateSerializer",
    "NodeAgentCreatedSerializer",
    "NodeAgentSerializer",
    "NodeSerializer",
    "OrderAckSerializer",
    "OrderListSerializer",
    "OrderSerializer",
    "RefSerializer",
    "RunExitSerializer",
    "RunSerializer",
    "UtilizationAnswerSerializer",
    "UtilizationItemSerializer",
    "UtilizationReportSerializer",
    "WorkloadBulkResultSerializer",
    "WorkloadBulkSubmitSerializer",
    "WorkloadDetailSerializer",
    "WorkloadSerializer",
    "WorkloadSubmitSerializer",
    "launch_spec_shown",
    "object_ref",
]
