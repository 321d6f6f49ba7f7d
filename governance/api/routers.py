"""The API's router: one class for every app's routes."""

from __future__ import annotations

from rest_framework.routers import DefaultRouter


class ApiRouter(DefaultRouter):
    """``DefaultRouter`` without ``.json`` suffix routes. ``root=False`` leaves out the
    browsable API root: only the first router mounted at ``/api/`` (governance's) has it."""

    include_format_suffixes = False

    def __init__(self, *, root: bool = False) -> None:
        self.include_root_view = root
        super().__init__()
