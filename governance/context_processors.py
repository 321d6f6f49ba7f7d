"""Template context shared by every page."""

from django.http import HttpRequest


def navigation(request: HttpRequest) -> dict:
    """Navigation entries for the signed-in user (filled in by the pages)."""
    return {}
