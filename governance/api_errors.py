"""One error shape for the whole API: ``{"detail": ..., "errors": {field: [messages]}}``.

``detail`` is always a sentence a person can read. ``errors`` is present when the error is
about particular fields; nested fields are named by path (``shares[1].percent``,
``parent.id``) so a client can point at the exact input that was refused.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class RequestTooLarge(exceptions.APIException):
    """The body is larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body is too large."
    default_code = "request_too_large"


def flatten_errors(detail, prefix: str = "") -> dict[str, list[str]]:
    """Flatten DRF's nested error detail into ``{"a.b[0].c": [messages]}``."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            if isinstance(key, int):  # ListSerializer reports items by index
                name = f"{prefix}[{key}]"
            elif key == "non_field_errors" and prefix:  # about the nested value as a whole
                name = prefix
            else:
                name = str(key) if not prefix else f"{prefix}.{key}"
            flat.update(flatten_errors(value, name))
        return flat
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return {prefix or "non_field_errors": [str(item) for item in detail]} if detail else {}
        flat = {}
        for index, item in enumerate(detail):
            flat.update(flatten_errors(item, f"{prefix}[{index}]"))
        return flat
    return {prefix or "non_field_errors": [str(detail)]}


def _django_validation_detail(exc: DjangoValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {field: [str(m) for m in msgs] for field, msgs in exc.message_dict.items()}
    return {"non_field_errors": [str(m) for m in exc.messages]}


def exception_handler(exc, context) -> Response | None:
    """Answer every refusal in the API's one shape, never with a 500.

    Services validate with ``django.core.exceptions.ValidationError`` so that they can be
    called from forms, commands and tasks alike; the API answers those with a 400 naming the
    field. ``RequestDataTooBig`` (a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``) is a 413.
    """
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(detail=_django_validation_detail(exc))
    elif isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge()
    elif isinstance(exc, DjangoPermissionDenied) and exc.args:
        # DRF would replace the service's reason with a generic sentence; keep it.
        exc = exceptions.PermissionDenied(detail=str(exc))
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(exc, exceptions.ValidationError) or (
        isinstance(data, dict) and set(data) != {"detail"}
    ):
        errors = flatten_errors(data)
        field, messages = next(iter(errors.items()), ("non_field_errors", ["Invalid input."]))
        summary = messages[0] if field == "non_field_errors" else f"{field}: {messages[0]}"
        response.data = {"detail": summary, "errors": errors}
    return response


def not_found(request, exception=None):
    """The site's 404: JSON in the API's shape under ``/api/``, the HTML page elsewhere.

    A URL under ``/api/`` that matches no route (an id with a dot or a slash in it, a typo)
    never reaches DRF; an API client should still get the one error shape, not an HTML page.
    """
    from django.http import JsonResponse
    from django.views.defaults import page_not_found

    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


def batch_items(data, key: str, serializer_class, maximum: int):
    """Validate a batch body ``{key: [item, …]}`` item by item with ``serializer_class``.

    Returns ``(items, errors)``: ``(index, validated data)`` of each good item, and every bad
    one's messages named ``key[index].field`` (all of them, whatever is wrong, so a sweep or
    an agent's report hears of every mistake at once). Raises DRF's ``ValidationError`` on
    ``key`` when the body holds no list of 1 to ``maximum`` items. The caller stores nothing
    unless ``errors`` is empty.
    """
    raw = data.get(key) if isinstance(data, dict) else None
    if not isinstance(raw, list) or not 1 <= len(raw) <= maximum:
        raise exceptions.ValidationError({key: [f"Give a list of 1 to {maximum:,} {key}."]})
    items, errors = [], {}
    for index, entry in enumerate(raw):
        one = serializer_class(data=entry)
        if not one.is_valid():
            for field, messages in flatten_errors(one.errors).items():
                name = "" if field == "non_field_errors" else f".{field}"
                errors[f"{key}[{index}]{name}"] = messages
            continue
        items.append((index, one.validated_data))
    return items, errors
