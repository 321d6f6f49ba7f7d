"""Browser pages of the live scheduler, included by ``governance/web_urls.py``.

Names are in the ``scheduler`` namespace: ``scheduler:nodes``, ``scheduler:workloads``, …
"""

from django.urls import path

from scheduler import preemption_views, views, whatif_views

app_name = "scheduler"

urlpatterns = [
    path("nodes/", views.nodes, name="nodes"),
    path("nodes/<int:pk>/", views.node_detail, name="node-detail"),
    path("nodes/<int:pk>/<slug:action>/", views.node_action, name="node-action"),
    path("workloads/", views.workloads, name="workloads"),
    path("workloads/submit/", views.workload_submit_view, name="workload-submit"),
    path("workloads/<int:pk>/", views.workload_detail, name="workload-detail"),
    path("workloads/<int:pk>/cancel/", views.workload_cancel_view, name="workload-cancel"),
    path(
        "workloads/<int:pk>/preempt/",
        preemption_views.workload_preempt_view,
        name="workload-preempt",
    ),
    path("simulator/", views.simulator, name="simulator"),
    path("simulator/run/", views.simulation_create, name="simulation-create"),
    path("simulator/<int:pk>/", views.simulation_detail, name="simulation-detail"),
    path("what-if/<int:pk>/", whatif_views.whatif_detail, name="whatif-detail"),
    path("what-if/request/<int:pk>/", whatif_views.whatif_request_preview, name="whatif-request"),
]
