"""Browser pages of the live scheduler, included by ``governance/web_urls.py``.

Names are in the ``scheduler`` namespace: ``scheduler:nodes``, ``scheduler:workloads``, …
"""

from django.urls import path

from scheduler import views

app_name = "scheduler"

urlpatterns = [
    path("nodes/", views.nodes, name="nodes"),
    path("nodes/<int:pk>/<slug:action>/", views.node_action, name="node-action"),
    path("workloads/", views.workloads, name="workloads"),
    path("workloads/<int:pk>/", views.workload_detail, name="workload-detail"),
    path("workloads/<int:pk>/cancel/", views.workload_cancel_view, name="workload-cancel"),
]
