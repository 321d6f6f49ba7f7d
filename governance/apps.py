"""App configuration for the budget domain."""

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    """The budget tree, allocations, approvals and roles."""

    name = "governance"
    verbose_name = "Budget governance"
