"""Routes of the scheduler API, included by ``governance/api_urls.py`` under ``/api/``.

User endpoints (sessions and user tokens): ``workloads/``, ``nodes/``, ``node-agents/``,
``clusters/<id>/idle-policy/``, ``what-if/``.
Node agent endpoints (agent tokens only): ``agent/…``.
"""

from django.urls import path

from governance.api.routers import ApiRouter
from scheduler.api import agent, idle_policy, preemptions, views, whatif

router = ApiRouter()
router.register("workloads", views.WorkloadViewSet, basename="workload")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("node-agents", views.NodeAgentViewSet, basename="nodeagent")

urlpatterns = [
    path("agent/register/", agent.RegisterView.as_view(), name="agent-register"),
    path("agent/heartbeat/", agent.HeartbeatView.as_view(), name="agent-heartbeat"),
    path("agent/orders/fetch/", agent.OrdersFetchView.as_view(), name="agent-orders-fetch"),
    path("agent/orders/<int:order_id>/ack/", agent.OrderAckView.as_view(), name="agent-order-ack"),
    path("agent/runs/<int:run_id>/exit/", agent.RunExitView.as_view(), name="agent-run-exit"),
    path("agent/utilization/", agent.UtilizationView.as_view(), name="agent-utilization"),
    path(
        "clusters/<int:pk>/idle-policy/",
        idle_policy.IdlePolicyView.as_view(),
        name="cluster-idle-policy",
    ),
    path("what-if/", whatif.WhatIfView.as_view(), name="what-if"),
    path("what-if/<int:pk>/", whatif.WhatIfDetailView.as_view(), name="what-if-detail"),
    path(
        "workloads/<int:pk>/preempt/",
        preemptions.WorkloadPreemptView.as_view(),
        name="workload-preempt",
    ),
    *router.urls,
]
