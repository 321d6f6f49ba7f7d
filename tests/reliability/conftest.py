"""Fixtures for the reliability tests (API fuzzing)."""

# The personas fixture (tests/personas.py), imported as in tests/governance/conftest.py.
from tests.personas import personas  # noqa: F401
