"""Logging filters of the console handler (``settings.LOGGING``)."""

from __future__ import annotations

import logging


class ClientErrorsWithoutTraceback(logging.Filter):
    """Keep a request's 4xx log line, drop its traceback.

    Django logs a refused request (403 for a page the user may not see, 400 for a malformed
    one) as a warning *with the exception*: a screenful of traceback for what is the user's
    mistake, not the server's, which buried real errors in ``make run``'s terminal. The line
    itself (``Forbidden (Permission denied): /audit/``) stays; a 5xx keeps its traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Strip the exception of a record about a response below 500; keep every record."""
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
