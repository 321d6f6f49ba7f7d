"""Browser pages of the budget domain."""

from django.urls import include, path

from governance import views

urlpatterns = [
    path("", views.home, name="home"),
    path("tree/", views.tree_index, name="tree-index"),
    path("clusters/<int:cluster_id>/tree/", views.tree, name="tree"),
    path(
        "clusters/<int:cluster_id>/split/<str:kind>/<int:pk>/",
        views.split_editor,
        name="split",
    ),
    path("history/<str:kind>/<int:pk>/", views.node_history, name="history"),
    path("requests/inbox/", views.approval_inbox_view, name="approval-inbox"),
    path("requests/mine/", views.my_requests, name="my-requests"),
    path("requests/<int:pk>/", views.approval_detail, name="approval-detail"),
    path("requests/<int:pk>/approve/", views.approval_approve_view, name="approval-approve"),
    path("requests/<int:pk>/reject/", views.approval_reject_view, name="approval-reject"),
    path("requests/<int:pk>/withdraw/", views.approval_withdraw_view, name="approval-withdraw"),
    path("dashboards/", include("governance.views.dashboards")),  # managers' dashboards
    path("reports/", include("governance.views.reports")),  # finance usage report
    path("audit/", include("governance.views.audit")),  # the audit trail (org admins)
    path("people/", include("governance.views.roles")),  # people and roles (managers)
    path("notifications/", include("governance.views.notifications")),  # the bell's centre
    path("", include("scheduler.web_urls")),  # nodes and workloads pages (scheduler/views/)
]
