"""The budget tree (organization → program → project), clusters, roles, allocations, approvals.

Shares are effective-dated, append-only ``Allocation`` rows: a change never edits an earlier
row, it adds a newer one. Writes go through ``governance.services``; reads that decide what a
user may see go through ``governance.selectors.visibility``.

One module per subject: ``tree`` (organizations, programs, projects, clusters), ``roles``,
``allocations``, ``approvals``, ``costs`` (rates, monthly report records), ``usage_days``
(the daily usage cache), ``audit``, ``notifications`` and ``deliveries`` (outgoing e-mails,
digests, webhook posts); ``fields`` builds fields several models share. Every model is
importable from ``governance.models``.
"""

from governance.models.allocations import PERCENT_VALIDATORS, Allocation
from governance.models.approvals import ApprovalDecision, ApprovalLine, ApprovalRequest
from governance.models.audit import AuditEvent, AuditEventQuerySet
from governance.models.costs import CostRate, MonthlyReportDelivery
from governance.models.deliveries import (
    DeliveryAttempts,
    EmailDelivery,
    EmailDigest,
    OrganizationWebhook,
    WebhookDelivery,
)
from governance.models.notifications import Notification, NotificationPreference
from governance.models.roles import RoleAssignment
from governance.models.tree import Cluster, Organization, Program, Project
from governance.models.usage_days import UsageDay, UsageDayCursor

__all__ = [
    "PERCENT_VALIDATORS",
    "Allocation",
    "ApprovalDecision",
    "ApprovalLine",
    "ApprovalRequest",
    "AuditEvent",
    "AuditEventQuerySet",
    "Cluster",
    "CostRate",
    "DeliveryAttempts",
    "EmailDelivery",
    "EmailDigest",
    "MonthlyReportDelivery",
    "Notification",
    "NotificationPreference",
    "Organization",
    "OrganizationWebhook",
    "Program",
    "Project",
    "RoleAssignment",
    "UsageDay",
    "UsageDayCursor",
    "WebhookDelivery",
]
