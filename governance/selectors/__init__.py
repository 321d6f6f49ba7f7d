"""Reads of the budget domain: visibility (who may see what), the tree, approvals."""
