"""Logs: one structured line per request, with a request id; JSON on request.

The request id comes from a sane `X-Request-ID` header or is made up, is returned in the
response's `X-Request-ID`, and is stamped on every log line written while the request
runs (the `invalid` verdict warnings included). No body is ever logged: event data never
reaches the log.
"""

from __future__ import annotations

import json
import logging
import logging.config
import re
import time
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.metrics import route_template
from app.settings import Settings

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
        else {"format": TEXT_FORMAT}
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


class RequestLogMiddleware:
    """Assigns the request id and writes the request's one access line when it ends."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_id(scope) or uuid.uuid4().hex
        token = _request_id.set(request_id)
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-request-id", request_id.encode()),
                ]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            access_log.info(
                "%s %s %d",
                scope["method"],
                scope["path"],
                status,
                extra={
                    "request_id": request_id,
                    "method": scope["method"],
                    "route": route_template(scope),
                    "path": scope["path"],
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )
            _request_id.reset(token)


def _incoming_id(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _SANE_ID.fullmatch(text) else None
    return None
