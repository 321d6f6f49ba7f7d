"""The node agent protocol: register, heartbeat, fetch orders, acknowledge, report exits.

Agent tokens only (``AgentTokenAuthentication``); each token acts for one node of one
cluster. An order or run of another node is a 404, like a missing one. Every call is safe to
repeat: fetching again redelivers what was not acknowledged, and acknowledging or reporting
the same thing twice changes nothing the second time. See docs/agents.md.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.parsers import LimitedJSONParser
from governance.api_errors import batch_items
from governance.parsing import whole_number
from scheduler.api.authentication import AgentTokenAuthentication, IsNodeAgent
from scheduler.api.serializers import (
    AgentAnswerSerializer,
    AgentHeartbeatAnswerSerializer,
    AgentHeartbeatSerializer,
    AgentRegisteredSerializer,
    AgentRegisterSerializer,
    OrderAckSerializer,
    OrderListSerializer,
    OrderSerializer,
    RunExitSerializer,
    UtilizationAnswerSerializer,
    UtilizationItemSerializer,
    UtilizationReportSerializer,
)
from scheduler.choices import OrderKind, OrderState
from scheduler.models import Node, Order, Run
from scheduler.services.executor_reports import (
    node_heartbeat,
    node_register,
    order_acknowledge,
    orders_deliver,
    run_report_exit,
)
from scheduler.services.utilization import MAX_REPORTS, utilization_report


class NotRegistered(exceptions.APIException):
    """The agent must register before it heartbeats or takes orders."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "Register this agent first (POST /api/agent/register/)."
    default_code = "not_registered"


class AgentView(APIView):
    """Base of the agent endpoints: agent tokens only, JSON bodies with a size limit."""

    authentication_classes = [AgentTokenAuthentication]
    permission_classes = [IsNodeAgent]
    parser_classes = [LimitedJSONParser]

    @property
    def agent(self):
        return self.request.auth

    def node(self) -> Node:
        """The agent's node (set at registration)."""
        if self.agent.node_id is None:
            raise NotRegistered()
        return self.agent.node

    def valid(self, serializer_class):
        serializer = serializer_class(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


def heartbeat_interval() -> float:
    """How often an agent should heartbeat: a quarter of the silence that marks its node down,
    so three lost heartbeats in a row are still not an expiry."""
    timeout = getattr(settings, "SCHEDULER_AGENT_TIMEOUT_SECONDS", 60)
    return max(1.0, timeout / 4)


def open_runs_on(node: Node) -> list[int]:
    """Runs the server believes are on ``node`` and whose start the agent acknowledged."""
    return list(
        Run.objects.filter(
            run_nodes__node=node,
            ended_at__isnull=True,
            orders__node=node,
            orders__kind=OrderKind.START,
            orders__state=OrderState.ACKNOWLEDGED,
        )
        .values_list("id", flat=True)
        .distinct()
    )


class RegisterView(AgentView):
    """Register (or re-register after a restart) this agent's node with its GPUs."""

    @extend_schema(
        tags=["agent"], request=AgentRegisterSerializer, responses=AgentRegisteredSerializer
    )
    def post(self, request):
        data = self.valid(AgentRegisterSerializer)
        if data["node"] != self.agent.name:
            raise DjangoValidationError(
                {"node": [f"This token is for node {self.agent.name!r}, not {data['node']!r}."]}
            )
        if data.get("gpu_indices") and len(data["gpu_indices"]) != data["gpus"]:
            raise DjangoValidationError(
                {"gpu_indices": [f"Lists {len(data['gpu_indices'])} GPUs, not {data['gpus']}."]}
            )
        node = node_register(agent=self.agent, gpus=data["gpus"])
        answer = {
            "node": node.name,
            "cluster": self.agent.cluster.slug,
            "state": node.state,
            "heartbeat_seconds": heartbeat_interval(),
            "open_runs": open_runs_on(node),
        }
        return Response(AgentRegisteredSerializer(answer).data)


class HeartbeatView(AgentView):
    """I am alive; these are the runs my processes carry. The answer names runs to stop."""

    @extend_schema(
        tags=["agent"],
        request=AgentHeartbeatSerializer,
        responses=AgentHeartbeatAnswerSerializer,
    )
    def post(self, request):
        data = self.valid(AgentHeartbeatSerializer)
        node = node_heartbeat(node=self.node())
        reported = {n for key in data["running"] if (n := whole_number(str(key))) is not None}
        # A process for a run that has ended (the node was declared down while the agent was
        # unreachable, say) would do the same work twice: tell the agent to stop it.
        still_open = set(
            Run.objects.filter(
                pk__in=reported, run_nodes__node=node, ended_at__isnull=True
            ).values_list("id", flat=True)
        )
        answer = {"state": node.state, "stop_runs": sorted(reported - still_open)}
        return Response(AgentHeartbeatAnswerSerializer(answer).data)


class OrdersFetchView(AgentView):
    """Orders for my node not yet acknowledged, stops first (they are marked delivered)."""

    @extend_schema(tags=["agent"], request=None, responses=OrderListSerializer)
    def post(self, request):
        orders = orders_deliver(node=self.node())
        return Response({"orders": OrderSerializer(orders, many=True).data})


class OrderAckView(AgentView):
    """I carried out this order. Acknowledging it again changes nothing."""

    @extend_schema(tags=["agent"], request=OrderAckSerializer, responses=AgentAnswerSerializer)
    def post(self, request, order_id: int):
        self.valid(OrderAckSerializer)
        order = Order.objects.filter(pk=order_id, node_id=self.node().pk).first()
        if order is None:
            raise exceptions.NotFound(f"No order {order_id} for this node.")
        order = order_acknowledge(order=order)
        return Response({"id": order.pk, "state": order.state})


class RunExitView(AgentView):
    """My process of this run ended (succeeded, failed, or preempted: stopped by an order).

    Reporting the same exit again changes nothing.
    """

    @extend_schema(tags=["agent"], request=RunExitSerializer, responses=AgentAnswerSerializer)
    def post(self, request, run_id: int):
        data = self.valid(RunExitSerializer)
        node = self.node()
        run = Run.objects.filter(pk=run_id, run_nodes__node=node).first()
        if run is None:
            raise exceptions.NotFound(f"No run {run_id} on this node.")
        run = run_report_exit(
            run=run, outcome=data["outcome"], exit_code=data["exit_code"], node=node
        )
        return Response({"id": run.pk, "state": run.end_reason or "running"})


class UtilizationView(AgentView):
    """What my GPUs did for my runs: periods of allocated and busy GPU-seconds per run.

    Up to 1,000 periods; all are stored or none (each bad one named by index, as
    ``reports[3].busy_gpu_seconds``). A run of another node is refused like a missing one.
    Sending the same periods again stores nothing more (200 instead of 201).
    """

    @extend_schema(
        tags=["agent"],
        request=UtilizationReportSerializer,
        responses={201: UtilizationAnswerSerializer, 200: UtilizationAnswerSerializer},
    )
    def post(self, request):
        node = self.node()
        items, errors = batch_items(request.data, "reports", UtilizationItemSerializer, MAX_REPORTS)
        if errors:
            raise DRFValidationError(errors)
        answer = utilization_report(
            node=node, reports=[item for _, item in items], now=timezone.now()
        )
        code = status.HTTP_201_CREATED if answer["stored"] else status.HTTP_200_OK
        return Response(UtilizationAnswerSerializer(answer).data, status=code)
