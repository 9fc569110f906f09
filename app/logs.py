"""Logs: one structured line per request, with a request id; JSON on request.

The request id comes from a sane `X-Request-ID` header or is made up, is returned in the
response's `X-Request-ID`, and is stamped on every log line written while the request
runs (the `invalid` verdict warnings included). No body is ever logged: event data never
reaches the log. In text format every message is escaped, so a client's value (a path
with an encoded newline) can never forge a line; JSON lines are escaped by JSON itself.
"""

from __future__ import annotations

import json
import logging
import logging.config
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from starlette.types import Scope

from app.settings import Settings
from app.text import printable

_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
_SANE_ID = re.compile(r"[A-Za-z0-9._\-]{1,64}")
_STANDARD = set(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "request_id",
    "color_message",
}

access_log = logging.getLogger("app.access")


class RequestIdFilter(logging.Filter):
    """Stamps the current request id (or None) on every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _request_id.get()
        return True


class TextFormatter(logging.Formatter):
    """One line per record: its message escaped (see `app.text.printable`).

    A message may carry a client's value (a path, a claim); escaping the whole message means
    no value can end a line and start a forged one. A traceback's lines are indented, so
    they can not pass for records either.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = record.message
        record.message = printable(message)
        try:
            return super().formatMessage(record)
        finally:
            record.message = message

    def formatException(self, ei: Any) -> str:
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))


def _indented(text: str) -> str:
    return "\n".join("    " + printable(line) for line in text.splitlines())


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
        }
        line |= {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def logging_config(settings: Settings) -> dict[str, Any]:
    """The `logging.config.dictConfig` of the process: text or JSON, with request ids.

    `serve` hands it to uvicorn too, which applies it in every worker process, so uvicorn's
    own lines come out in the same format.
    """
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"}
        if settings.log_format == "json"
        else {"()": f"{__name__}.TextFormatter", "fmt": TEXT_FORMAT}
    )
    quiet = max(logging.WARNING, logging.getLevelNamesMapping()[settings.log_level.upper()])
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": f"{__name__}.RequestIdFilter"}},
        "formatters": {"main": formatter},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "main",
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["stderr"], "level": settings.log_level.upper()},
        "loggers": {
            **{
                name: {"handlers": [], "propagate": True}
                for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
            },
            # These log statements with their parameters (event data) at INFO or DEBUG
            # (SQLAlchemy even turns echo on when its logger allows INFO): never below
            # WARNING, whatever the service's level.
            **{name: {"level": quiet} for name in ("aiosqlite", "asyncpg", "sqlalchemy.engine")},
        },
    }


def configure_logging(settings: Settings) -> None:
    """Apply `logging_config(settings)` to this process."""
    logging.config.dictConfig(logging_config(settings))


def log_request(
    request_id: str, method: str, route: str, path: str, status: int, seconds: float
) -> None:
    """Write the request's one access line (the front door calls it as the request ends).

    The path is the client's, as sent: both formatters escape it (`TextFormatter`, JSON).
    """
    duration_ms = round(seconds * 1000, 2)
    access_log.info(
        "%s %s %d %s %.2fms",
        method,
        path,
        status,
        route,
        duration_ms,
        extra={
            "request_id": request_id,
            "method": method,
            "route": route,
            "path": path,
            "status": status,
            "duration_ms": duration_ms,
        },
    )


def incoming_request_id(scope: Scope) -> str | None:
    """A sane `X-Request-ID` of the request, or None (then one is made up)."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _SANE_ID.fullmatch(text) else None
    return None


@contextmanager
def request_id_set(request_id: str) -> Iterator[None]:
    """Stamp `request_id` on every log line written inside the block."""
    token = _request_id.set(request_id)
    try:
        yield
    finally:
        _request_id.reset(token)
