"""Fixtures for the budget domain's tests."""

# The personas fixture (tests/personas.py). Imported rather than listed in ``pytest_plugins``
# because pytest refuses ``pytest_plugins`` in a conftest below the top level when the whole
# suite runs.
from tests.personas import personas  # noqa: F401
