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
