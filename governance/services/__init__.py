"""Writes of the budget domain: allocations (splits) and the approval state machine."""
