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


def has_nul(value) -> bool:
    """Does any string (key or value) of a parsed JSON value hold a NUL character?
    PostgreSQL stores none, in text or in jsonb."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def nesting_depth(value) -> int:
    """How deep lists and objects nest in a parsed JSON value (iterative: any depth)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in items)
    return deepest


class LimitedJSONParser(parsers.JSONParser):
    """JSON parser that refuses bodies above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (a 413) and
    bodies nested deeper than ``MAX_JSON_DEPTH`` (a 400, also when Python's own parser would
    run out of stack on them) or holding a NUL character anywhere (a 400)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(read_limited(stream), media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep.") from exc
        if nesting_depth(data) > MAX_JSON_DEPTH:
            raise ParseError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep.")
        if has_nul(data):
            raise ParseError("NUL characters are not accepted.")
        return data


class LimitedFormParser(parsers.FormParser):
    """Form parser that refuses bodies above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (a 413)."""

    def parse(self, stream, media_type=None, parser_context=None):
        return super().parse(read_limited(stream), media_type, parser_context)
