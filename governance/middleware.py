"""Site-wide request guards: body size before reading, NUL characters, and a 503 for a
database that is away.

Refuse a request whose declared body is larger than the site accepts, before reading it.

Django checks ``DATA_UPLOAD_MAX_MEMORY_SIZE`` for form fields, but a multipart file upload is
received whole (spooled to a temporary file) before any view can look at its size: a 1 GB
"trace" would be written to disk only for the simulator to refuse it. This answers 413 from
``Content-Length`` alone; the body is never read. Front proxies should set the same limit.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db.utils import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse

logger = logging.getLogger(__name__)


class RequestSizeLimitMiddleware:
    """413 for any request declaring more than ``MAX_REQUEST_BYTES`` of body."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.MAX_REQUEST_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0  # malformed: Django's own parsing refuses it later
        if limit and length > limit:
            message = f"Request body is too large: {length:,} bytes; the limit is {limit:,} bytes."
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": message}, status=413)
            return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


class NulCharacterMiddleware:
    """400 for a NUL character in any query parameter, or in any form field of a page.

    PostgreSQL stores no NUL in text, so one that reaches a query or a row is a 500; no field
    of ours has a use for it. (API JSON bodies are checked by their parser, API form fields
    by DRF's fields; uploaded files are bytes and may hold anything.)
    """

    FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        fields = [request.GET]
        is_form = request.content_type in self.FORM_TYPES
        if request.method == "POST" and is_form and not request.path.startswith("/api/"):
            fields.append(request.POST)
        for query in fields:
            for name, values in query.lists():
                if "\x00" in name or any("\x00" in v for v in values):
                    message = f"{name.replace(chr(0), '')!r}: NUL characters are not accepted."
                    if request.path.startswith("/api/"):
                        return JsonResponse({"detail": message}, status=400)
                    return HttpResponse(
                        message, status=400, content_type="text/plain; charset=utf-8"
                    )
        return self.get_response(request)


class DatabaseUnavailableMiddleware:
    """503 with ``Retry-After`` when the database cannot be reached, instead of a 500.

    While PostgreSQL restarts (a failover, an upgrade) every request fails: a 500 tells a
    script or a node agent "the server is broken", a 503 with ``Retry-After`` tells it "try
    again in a few seconds", which the agent and well-behaved clients do. Only the database's
    connection-level errors are translated (``OperationalError``, ``InterfaceError``); any
    other error is still a 500 and still logged as one.
    """

    RETRY_AFTER_SECONDS = 5

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        """Answer 503 for a database that is away; let every other exception through."""
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        logger.warning(
            "Database unavailable for %s %s: %s", request.method, request.path, exception
        )
        message = "The database is unavailable; try again in a few seconds."
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": message}, status=503)
        else:
            response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(self.RETRY_AFTER_SECONDS)
        return response
