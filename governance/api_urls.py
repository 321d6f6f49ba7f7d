"""REST API routes: one router for the budget domain (and, later, the scheduler).

Route names live in the ``api`` namespace (``api:program-list``, ``api:approvalrequest-approve``).
Format-suffix routes (``.json``) are off: one URL per resource, content negotiated by headers.
"""

from django.urls import include, path

from governance.api import views
from governance.api.notifications import NotificationViewSet
from governance.api.routers import ApiRouter

app_name = "api"


router = ApiRouter(root=True)
router.register("organizations", views.OrganizationViewSet, basename="organization")
router.register("programs", views.ProgramViewSet, basename="program")
router.register("projects", views.ProjectViewSet, basename="project")
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("allocations", views.AllocationViewSet, basename="allocation")
router.register("splits", views.SplitViewSet, basename="split")
router.register("approval-requests", views.ApprovalRequestViewSet, basename="approvalrequest")
router.register("notifications", NotificationViewSet, basename="notification")

urlpatterns = [
    path("token/", views.TokenView.as_view(), name="token"),
    *router.urls,
    path("", include("governance.api.audit")),  # audit events, role assignments
    path("", include("governance.api.reports")),  # finance usage report (governance/api/reports.py)
    path("", include("scheduler.api_urls")),  # workloads, nodes, node agents (scheduler/api/)
]
