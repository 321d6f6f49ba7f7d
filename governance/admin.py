"""Django admin for the budget domain (staff only, as every Django admin page is).

The admin is for looking things up and fixing the tree's names and roles. Shares and
approvals change only through the services (the 100 % check, the parent lock, the decision
history), so allocations, approval requests and their decisions are read-only here: no add,
change or delete, even for superusers.
"""

from __future__ import annotations

from django.contrib import admin

from governance.models import (
    Allocation,
    ApprovalDecision,
    ApprovalLine,
    ApprovalRequest,
    Cluster,
    CostRate,
    MonthlyReportDelivery,
    Organization,
    Program,
    Project,
    RoleAssignment,
)


class ReadOnlyAdminMixin:
    """Viewable, never written from the admin: these rows are append-only history."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Program)
class ProgramAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "organization"]
    list_filter = ["organization"]
    search_fields = ["name", "slug"]
    list_select_related = ["organization"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "program", "cost_centre"]
    list_filter = ["program__organization", "program"]
    search_fields = ["name", "slug", "cost_centre"]
    list_select_related = ["program"]


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "gpu_type", "nodes", "gpus_per_node", "total_gpus", "organization"]
    list_filter = ["organization", "gpu_type"]
    search_fields = ["name", "slug"]


@admin.register(RoleAssignment)
class RoleAssignmentAdmin(admin.ModelAdmin):
    list_display = ["user", "role", "scope", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username", "user__email"]
    autocomplete_fields = ["user"]
    raw_id_fields = ["organization", "program", "project"]
    list_select_related = ["user", "organization", "program", "project"]


@admin.register(Allocation)
class AllocationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "node",
        "cluster",
        "percent",
        "valid_from",
        "valid_to",
        "set_by",
        "approval_request",
        "created_at",
    ]
    list_filter = ["cluster", "program", "project__program"]
    search_fields = ["reason", "program__name", "project__name", "set_by__username"]
    date_hierarchy = "valid_from"
    list_select_related = ["cluster", "program", "project", "set_by", "approval_request"]


class ApprovalLineInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ApprovalLine
    fields = ["program", "project", "previous_percent", "percent"]
    readonly_fields = fields
    extra = 0


class ApprovalDecisionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ApprovalDecision
    fields = ["at", "actor", "action", "from_state", "to_state", "comment"]
    readonly_fields = fields
    extra = 0


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "__str__",
        "parent",
        "cluster",
        "requested_by",
        "state",
        "effective_from",
        "effective_to",
        "created_at",
    ]
    list_filter = ["state", "organization", "program", "cluster"]
    search_fields = ["reason", "requested_by__username"]
    inlines = [ApprovalLineInline, ApprovalDecisionInline]
    list_select_related = ["organization", "program", "cluster", "requested_by"]


@admin.register(ApprovalDecision)
class ApprovalDecisionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["request", "action", "actor", "from_state", "to_state", "at"]
    list_filter = ["action"]
    search_fields = ["comment", "actor__username"]
    list_select_related = ["request", "actor"]


@admin.register(CostRate)
class CostRateAdmin(admin.ModelAdmin):
    """Rates are set here by staff: add a newer row to change a rate (history is kept)."""

    list_display = ["gpu_type", "rate_per_gpu_hour", "currency", "valid_from", "valid_to", "note"]
    list_filter = ["gpu_type", "currency"]
    ordering = ["gpu_type", "-valid_from"]


@admin.register(MonthlyReportDelivery)
class MonthlyReportDeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["organization", "month", "sent_at", "total_gpu_seconds"]
    list_filter = ["organization"]
