"""Logging filters named in ``settings.LOGGING``."""

from __future__ import annotations

import logging


class ServerErrorsOnly(logging.Filter):
    """Keep ``django.request`` records for 5xx only.

    The web server's access log already has a line for every 4xx (method, path, status); Django's
    "Not Found: /path" warning for the same request would say it a second time.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        return not (isinstance(status, int) and 400 <= status < 500)
