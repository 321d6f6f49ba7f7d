"""Browser pages of the budget domain: thin views over the services and selectors.

Every object is resolved through the visibility selector's querysets first, so an object the
user cannot see is a 404 before any service runs; a service's ``PermissionDenied`` becomes the
403 page and its ``ValidationError`` goes back into the form next to the field it names.
"""

from governance.views.approvals import (
    approval_approve_view,
    approval_detail,
    approval_inbox_view,
    approval_reject_view,
    approval_withdraw_view,
    my_requests,
)
from governance.views.pages import home, node_history, tree, tree_index
from governance.views.split import split_editor

__all__ = [
    "approval_approve_view",
    "approval_detail",
    "approval_inbox_view",
    "approval_reject_view",
    "approval_withdraw_view",
    "home",
    "my_requests",
    "node_history",
    "split_editor",
    "tree",
    "tree_index",
]
