"""Pagination that refuses a malformed ``limit`` or ``offset`` instead of ignoring it.

DRF's ``LimitOffsetPagination`` silently falls back to the default page for ``limit=-1`` or
``offset=abc``; a client that asked for something else then reads the wrong page without
knowing. Here bad values are a 400 naming the parameter (found by the API fuzzer).
"""

from __future__ import annotations

import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """``limit`` must be a whole number >= 1 and ``offset`` a whole number >= 0, when given."""

    def _parameter(self, request, name: str, minimum: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None:
            return None
        # Digits only, and few enough for PostgreSQL's bigint OFFSET/LIMIT.
        value = int(raw) if re.fullmatch(r"[0-9]{1,12}", raw) else None
        if value is None or value < minimum:
            raise ValidationError({name: [f"Must be a whole number, at least {minimum}."]})
        return value

    def get_limit(self, request):
        limit = self._parameter(request, self.limit_query_param, 1)
        if limit is None:
            return self.default_limit
        return min(limit, self.max_limit) if self.max_limit else limit

    def get_offset(self, request):
        return self._parameter(request, self.offset_query_param, 0) or 0
