"""Refuse a request whose declared body is larger than the site accepts, before reading it.

Django checks ``DATA_UPLOAD_MAX_MEMORY_SIZE`` for form fields, but a multipart file upload is
received whole (spooled to a temporary file) before any view can look at its size: a 1 GB
"trace" would be written to disk only for the simulator to refuse it. This answers 413 from
``Content-Length`` alone; the body is never read. Front proxies should set the same limit.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse, JsonResponse


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
