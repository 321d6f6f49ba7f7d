"""Fixtures for the KAI adapter's tests."""

# The personas fixture (tests/personas.py), imported as the other test directories do
# (pytest refuses ``pytest_plugins`` in a conftest below the top level).
from tests.personas import personas  # noqa: F401
