"""What every page of the live scheduler shares: how often it refreshes itself."""

from __future__ import annotations

from django.http import HttpRequest

REFRESH_SECONDS = 5


def live_refresh(request: HttpRequest) -> int | None:
    """Seconds between page refreshes, or None when the user turned it off."""
    return None if request.GET.get("live") == "0" else REFRESH_SECONDS
