"""Logs: one structured line per request, with a request id; JSON on request.

The request id comes from a sane `X-Request-ID` header or is made up, is returned in the
response's `X-Request-ID`, and is stamped on every log line written while the request
runs (the `invalid` verdict warnings included). No body is ever logged: event data never
reaches the log.
"""

from __future__ import annotations

import json
import logging
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
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "request_id"}

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


def configure_logging(settings: Settings) -> None:
    """Root logging for the process: text or JSON (`EVENTLOG_LOG_FORMAT`), with request ids."""
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())


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
