"""The console keeps a refused request's log line and drops its traceback."""

from __future__ import annotations

import io
import logging

import pytest

from governance.log_filters import ClientErrorsWithoutTraceback


def console_handler() -> logging.Handler:
    """The root logger's console handler as ``settings.LOGGING`` configured it."""
    [handler] = [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]
    return handler


@pytest.mark.django_db
def test_a_forbidden_page_logs_one_line_without_a_traceback(client, caplog):
    from tests.personas import build_personas

    personas = build_personas()
    client.force_login(personas.researcher)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/audit/")
    assert response.status_code == 403
    # Django logs it with the exception; the console handler's filter took it off the record
    # on its way (caplog sees the same record after).
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.exc_info is None
    out = io.StringIO()
    handler = console_handler()
    assert any(isinstance(f, ClientErrorsWithoutTraceback) for f in handler.filters)
    stream = handler.setStream(out)
    try:
        handler.handle(record)
    finally:
        handler.setStream(stream)
    text = out.getvalue()
    assert text.startswith("Forbidden (Permission denied): /audit/")
    assert "Traceback" not in text and text.count("\n") == 1


def test_a_server_error_keeps_its_traceback():
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        record = logging.LogRecord(
            "django.request", logging.ERROR, __file__, 1, "Internal Server Error: /x/", (),
            (type(exc), exc, exc.__traceback__),
        )  # fmt: skip
    record.status_code = 500
    assert ClientErrorsWithoutTraceback().filter(record)
    assert record.exc_info is not None


def test_no_handler_on_the_way_prints_a_refused_requests_traceback(settings):
    # With DEBUG on (make run), Django's own console handler printed the traceback beside
    # the filtered line. Every handler a django.request record reaches must print it bare.
    settings.DEBUG = True
    try:
        raise PermissionError("no")
    except PermissionError as exc:
        exc_info = (type(exc), exc, exc.__traceback__)
    logger = logging.getLogger("django.request")
    printed = []
    current = logger
    while current is not None:
        for handler in current.handlers:
            if type(handler).__module__.startswith("_pytest"):
                continue  # pytest's own capture, not the console
            record = logger.makeRecord(
                logger.name, logging.WARNING, __file__, 1, "Forbidden (Permission denied): %s",
                ("/audit/",), exc_info, extra={"status_code": 403},
            )  # fmt: skip
            if handler.filter(record):
                printed.append(handler.format(record))
        current = current.parent if current.propagate else None
    assert printed  # the console prints it…
    assert all("Traceback" not in text for text in printed)  # …on one line
