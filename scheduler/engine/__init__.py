"""The scheduling engine: pure Python, no Django, no I/O, deterministic.

State and policy in, orders and reasons out. Both the live loop and the simulator call it.
"""
