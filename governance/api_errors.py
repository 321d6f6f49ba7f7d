"""One error shape for the whole API: ``{"detail": ..., "errors": {field: [messages]}}``."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context) -> Response | None:
    """Turn Django validation errors raised by services into 400s that name the field.

    Services validate with ``django.core.exceptions.ValidationError`` so that they can be
    called from forms, commands and tasks alike; the API must answer those with a 400, never
    a 500.
    """
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            detail = {field: [str(m) for m in msgs] for field, msgs in exc.message_dict.items()}
        else:
            detail = {"non_field_errors": [str(m) for m in exc.messages]}
        exc = exceptions.ValidationError(detail=detail)
    return drf_exception_handler(exc, context)
