"""The utilization pages' fixtures: fast password hashing and the hand-worked day."""

from tests.governance.utilization_pages.world import fast_password_hasher, world  # noqa: F401
