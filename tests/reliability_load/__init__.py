"""Load and fault-injection harness: ``make load`` / ``make faults``.

Benchmarks, not tests: nothing here is collected by pytest (no ``test_*.py``). See
docs/reliability.md for what it does and the figures it measured.
"""
