"""Enumerations of the budget domain, stored as text and guarded by CheckConstraints."""

from django.db import models


class Role(models.TextChoices):
    """A role held on one node of the budget tree; it applies to that node's subtree."""

    ORG_ADMIN = "org_admin", "Org admin"
    PROGRAM_MANAGER = "program_manager", "Program manager"
    PI = "pi", "PI (project lead)"
    RESEARCHER = "researcher", "Researcher"
    FINANCE = "finance", "Finance"


# Which level of the tree each role is held on.
ORGANIZATION_ROLES = (Role.ORG_ADMIN, Role.FINANCE)
PROGRAM_ROLES = (Role.PROGRAM_MANAGER,)
PROJECT_ROLES = (Role.PI, Role.RESEARCHER)


class ApprovalState(models.TextChoices):
    """Life cycle of an approval request (transitions are services in ``services/approvals``)."""

    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    APPLIED = "applied", "Applied"
    WITHDRAWN = "withdrawn", "Withdrawn"


class DecisionAction(models.TextChoices):
    """What a person (or the system, for ``apply``) did to an approval request."""

    CREATE = "create", "Created"
    SUBMIT = "submit", "Submitted"
    APPROVE = "approve", "Approved"
    REJECT = "reject", "Rejected"
    WITHDRAW = "withdraw", "Withdrawn"
    APPLY = "apply", "Applied"
    APPLY_FAILED = "apply_failed", "Could not apply"
    COMMENT = "comment", "Commented"


class AuditAction(models.TextChoices):
    """What an audit event records (``governance.models.AuditEvent``, docs/reliability.md)."""

    SHARE_CHANGE = "share_change", "Share change"
    APPROVAL_SUBMITTED = "approval_submitted", "Request submitted"
    APPROVAL_APPROVED = "approval_approved", "Request approved"
    APPROVAL_REJECTED = "approval_rejected", "Request rejected"
    APPROVAL_WITHDRAWN = "approval_withdrawn", "Request withdrawn"
    APPROVAL_APPLIED = "approval_applied", "Request applied"
    NODE_DRAIN = "node_drain", "Node drained"
    NODE_UNDRAIN = "node_undrain", "Node undrained"
    NODE_DOWN = "node_down", "Node marked down"
    NODE_UP = "node_up", "Node brought up"
    RUN_PREEMPT_FORCED = "run_preempt_forced", "Forced preemption"
    ROLE_GRANTED = "role_granted", "Role granted"
    ROLE_REVOKED = "role_revoked", "Role revoked"
    IDLE_POLICY_CHANGE = "idle_policy_change", "Idle rule changed"


class NotificationKind(models.TextChoices):
    """What a notification is about (``governance.models.Notification``, docs/notifications.md)."""

    APPROVAL_AWAITING = "approval_awaiting", "A request awaits your decision"
    APPROVAL_DECIDED = "approval_decided", "Your request was decided or applied"
    SHARE_CHANGED = "share_changed", "A change of share affects your project"
    WORKLOAD_STARTED = "workload_started", "Your workload started"
    WORKLOAD_PREEMPTED = "workload_preempted", "Your workload was preempted or evicted"
    WORKLOAD_FINISHED = "workload_finished", "Your workload finished"
    WORKLOAD_FAILED = "workload_failed", "Your workload failed"
    WORKLOAD_IDLE = "workload_idle", "Your workload holds GPUs it does not use"
    NODE_ATTENTION = "node_attention", "A node you operate went down or finished draining"
    REPORT_READY = "report_ready", "The monthly usage report is ready"
    TEAM_UNDER_DELIVERED = "team_under_delivered", "Your team got less than it was owed"
    MONTH_USAGE = "month_usage", "Your team's month passed a share of its entitlement"


class EmailChoice(models.TextChoices):
    """Whether a kind of notification also goes out by e-mail."""

    OFF = "off", "In the app only"
    IMMEDIATE = "immediate", "Also by e-mail, at once"
    DAILY = "daily", "Also by e-mail, in a daily digest"


class DeliveryState(models.TextChoices):
    """Where one e-mail of a notification is (``governance.models.EmailDelivery``)."""

    QUEUED = "queued", "Queued"
    SENDING = "sending", "Being sent"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
