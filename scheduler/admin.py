"""Django admin for the live scheduler (staff only): for looking things up, not for changes.

Every state here changes through services (compare-and-set transitions, the ledger's unique
keys, the cycle lock), so every model is read-only in the admin; operators use the node
page and API (drain, undrain, mark down), researchers the workload API.
"""

from __future__ import annotations

from django.contrib import admin

from governance.admin import ReadOnlyAdminMixin
from scheduler.models import (
    EntitlementRecord,
    Node,
    NodeAgent,
    Order,
    Run,
    SchedulingCycle,
    SlurmConnection,
    UsageHour,
    UsageRecord,
    Workload,
)


@admin.register(Node)
class NodeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["name", "cluster", "gpus", "state", "state_source", "last_heartbeat"]
    list_filter = ["cluster", "state"]
    search_fields = ["name"]


@admin.register(NodeAgent)
class NodeAgentAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["name", "cluster", "node", "token_prefix", "last_seen_at", "revoked_at"]
    list_filter = ["cluster"]
    exclude = ["token_hash"]


@admin.register(Workload)
class WorkloadAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id", "name", "project", "cluster", "gpus", "nodes", "min_runtime_seconds", "state",
        "queue_key", "submitted_at",
    ]  # fmt: skip
    list_filter = ["cluster", "state"]
    search_fields = ["name"]
    list_select_related = ["project", "cluster"]


@admin.register(Run)
class RunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id", "workload", "attempt", "gpus", "lane", "started_at", "ended_at", "end_reason",
    ]  # fmt: skip
    list_filter = ["cluster", "end_reason", "lane"]
    list_select_related = ["workload"]


@admin.register(Order)
class OrderAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["idempotency_key", "kind", "node", "state", "created_at", "acknowledged_at"]
    list_filter = ["kind", "state"]
    list_select_related = ["node"]


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "run", "source", "external_id", "project", "interval_start", "interval_end",
        "gpu_seconds", "charge",
    ]  # fmt: skip
    list_filter = ["cluster", "charge", "source"]
    list_select_related = ["project"]


@admin.register(EntitlementRecord)
class EntitlementRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "project", "interval_start", "interval_end", "entitled_gpu_seconds", "demand_gpu_seconds",
    ]  # fmt: skip
    list_filter = ["cluster"]


@admin.register(UsageHour)
class UsageHourAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "project", "hour", "budgeted_gpu_seconds", "burst_gpu_seconds", "free_gpu_seconds",
        "entitled_gpu_seconds", "demand_gpu_seconds",
    ]  # fmt: skip
    list_filter = ["cluster"]


@admin.register(SchedulingCycle)
class SchedulingCycleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "cluster", "started_at", "duration_seconds", "policy", "pending", "running", "starts",
        "preemptions", "orders", "engine",
    ]  # fmt: skip
    list_filter = ["cluster", "policy", "engine"]


@admin.register(SlurmConnection)
class SlurmConnectionAdmin(admin.ModelAdmin):
    """Editable: configuration of a Slurm site (docs/slurm.md); the cursors are read-only."""

    list_display = ["slurm_cluster", "cluster", "enabled", "last_sync_at", "last_import_at"]
    list_filter = ["enabled"]
    readonly_fields = [
        "usage_imported_until", "last_sync_at", "last_sync_summary", "last_import_at",
        "last_import_summary", "created_at",
    ]  # fmt: skip
