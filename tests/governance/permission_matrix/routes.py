"""The routes the matrix walks: the URL configuration, recursively, minus ``SKIPPED``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver

# Route prefixes left out of the matrix, and why. Everything else must have a decision.
SKIPPED = {
    "admin/": "Django admin: staff only, guarded by Django's own is_staff/permission checks.",
    "accounts/": "django-allauth sign-in, sign-up, sign-out, password reset: open by design.",
    "api/schema/": "OpenAPI schema: public by design (no data), tested in test_api_schema.py.",
    "api/docs/": "Swagger UI around the schema: public by design, tested in test_api_schema.py.",
    "static/": "Static files.",
}


@dataclass(frozen=True)
class Route:
    name: str
    route: str
    takes_ids: bool
    callback: Callable


def _walk(patterns, prefix: str = "", namespace: str = "", groups: int = 0):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        own_groups = groups + len(pattern.pattern.regex.groupindex)
        if isinstance(pattern, URLResolver):
            ns = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _walk(pattern.url_patterns, route, ns, own_groups)
        elif isinstance(pattern, URLPattern):
            yield Route(
                name=f"{namespace}{pattern.name}" if pattern.name else f"<unnamed {route}>",
                route=route,
                takes_ids=own_groups > 0,
                callback=pattern.callback,
            )


def _skipped(route: str) -> bool:
    plain = route.replace("^", "")
    return any(plain.startswith(prefix) for prefix in SKIPPED)


def collect_routes() -> dict[str, Route]:
    """Every route of the URL configuration outside ``SKIPPED``, by name."""
    return {r.name: r for r in _walk(get_resolver().url_patterns) if not _skipped(r.route)}


ROUTES = collect_routes()
