"""Request parsers that enforce ``DATA_UPLOAD_MAX_MEMORY_SIZE`` and, for JSON, a nesting depth.

Kept apart from the views: REST_FRAMEWORK's DEFAULT_PARSER_CLASSES names these classes, and
DRF resolves that setting while the view classes are being defined.
"""

from __future__ import annotations

from io import BytesIO

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers
from rest_framework.exceptions import ParseError


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


# No request of ours nests deeper than a few levels (a launch spec's env is depth 3); past this
# a body is refused before anything reads it.
MAX_JSON_DEPTH = 32


def json_refusal(value) -> str | None:
    """Why a parsed JSON value is refused, or None: nested deeper than ``MAX_JSON_DEPTH``, or
    a NUL character in any key or string (PostgreSQL stores none, in text or in jsonb). One
    iterative pass over the value (any depth, no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "NUL characters are not accepted."
            continue
        if isinstance(item, dict):
            stack.extend((key, depth) for key in item)
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            return f"JSON nested more than {MAX_JSON_DEPTH} levels deep."
        stack.extend((child, depth + 1) for child in children)
    return None


class LimitedJSONParser(parsers.JSONParser):
    """JSON parser that refuses bodies above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (a 413) and
    bodies nested deeper than ``MAX_JSON_DEPTH`` (a 400, also when Python's own parser would
    run out of stack on them) or holding a NUL character anywhere (a 400)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(read_limited(stream), media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep.") from exc
        refusal = json_refusal(data)
        if refusal is not None:
            raise ParseError(refusal)
        return data


class LimitedFormParser(parsers.FormParser):
    """Form parser that refuses bodies above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (a 413)."""

    def parse(self, stream, media_type=None, parser_context=None):
        return super().parse(read_limited(stream), media_type, parser_context)
