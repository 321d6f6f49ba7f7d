"""Request parsers that enforce ``DATA_UPLOAD_MAX_MEMORY_SIZE``.

Kept apart from the views: REST_FRAMEWORK's DEFAULT_PARSER_CLASSES names these classes, and
DRF resolves that setting while the view classes are being defined.
"""

from __future__ import annotations

from io import BytesIO

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers


def read_limited(stream):
    """The request body as a new stream, or ``RequestDataTooBig`` past the size limit.

    Django checks ``DATA_UPLOAD_MAX_MEMORY_SIZE`` only when ``request.body`` is read, while DRF
    parsers read the stream; without this an oversized JSON or form body would be read whole.
    The limit is read at call time so tests and deployments can change it.
    """
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if limit is None or stream is None:
        return stream
    body = stream.read(limit + 1)
    if len(body) > limit:
        raise RequestDataTooBig(f"Request body exceeded {limit} bytes.")
    return BytesIO(body)


class LimitedJSONParser(parsers.JSONParser):
    """JSON parser that refuses bodies above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (a 413)."""

    def parse(self, stream, media_type=None, parser_context=None):
        return super().parse(read_limited(stream), media_type, parser_context)


class LimitedFormParser(parsers.FormParser):
    """Form parser that refuses bodies above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (a 413)."""

    def parse(self, stream, media_type=None, parser_context=None):
        return super().parse(read_limited(stream), media_type, parser_context)
