"""The audit trail records every change — who, when, what, before/after — and nothing else.

One module per subject. One test per recorded change kind (share changes by split and by approval, each approval
decision, node drain/undrain/down/up by an operator and by the system, role changes; forced
preemption is in tests/scheduler/test_preempt_force.py), then refused changes that must
leave no event, then the append-only guarantees (the app and the database refuse edits).
"""
