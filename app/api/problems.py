"""Every error leaves as `application/problem+json` (RFC 9457) with a stable `code`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.schemas import Problem
from app.domain.decision import Reason
from app.domain.paging import PageRefusal
from app.service.errors import (
    AmbiguousStream,
    InvalidRequest,
    Limit,
    LimitExceeded,
    PageRefused,
)
from app.service.live import LiveRefused, TooManyReaders
from app.storage.errors import (
    AppendRefusedError,
    NotFound,
    StorageError,
    StorageUnavailable,
    UnknownGeneration,
    UnknownStream,
)

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "body_too_large",
    415: "unsupported_media_type",
}


class ProblemResponse(JSONResponse):
    """A JSON response with the problem media type."""

    media_type = PROBLEM_MEDIA_TYPE


def problem(
    status: int, code: str, detail: str, *, headers: Mapping[str, str] | None = None, **extra: Any
) -> ProblemResponse:
    """Build one problem response."""
    body = {
        "type": f"urn:mcp-eventlog:problem:{code}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    return ProblemResponse(jsonable_encoder(body), status_code=status, headers=headers)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries that document problem bodies for these statuses."""
    return {
        status: {
            "model": Problem,
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


class Unauthenticated(Exception):
    """No key, or a key that is not configured."""


class Forbidden(Exception):
    """A valid key without the scope the route needs."""


class UnsupportedMediaType(Exception):
    """The body is not declared as JSON (or is encoded)."""


class HostNotAllowed(Exception):
    """The `Host` names no host this service answers as (a DNS-rebinding page, say)."""


class OriginNotAllowed(Exception):
    """A browser page of another origin sent the request."""


class BodyTooLarge(Exception):
    """The body is over `max_body_bytes`."""


class BodyTimeout(Exception):
    """The body did not arrive within `body_timeout_seconds`."""


class Overloaded(Exception):
    """The process holds as many request bodies as it may (`max_body_bytes_in_flight`)."""


class InvalidJson(Exception):
    """The body is not strict JSON (not UTF-8, broken, or a key twice in one object)."""


class InvalidText(Exception):
    """A string of the request is not valid UTF-8 (a lone surrogate)."""


class NotAcceptable(Exception):
    """The client accepts none of the media types the route answers with."""


# The one error table: every refusal a lower layer raises, as (status, code, headers).
# Lower layers raise typed errors in the problem's words; only this table speaks HTTP.
_Rule = Callable[[Any], tuple[int, str]]
_RETRY = {"Retry-After": "1"}
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="mcp-eventlog"'}
_PAGE_STATUS = {
    PageRefusal.BEYOND_TAIL: 409,
    PageRefusal.EXPIRED: 410,
    PageRefusal.EVICTED: 410,
}
_LIMIT_CODE = {Limit.BATCH_EVENTS: "batch_too_large", Limit.EVENT_BYTES: "event_too_large"}
# An invalid claim on the live route: an EventSource stops on these instead of retrying.
_LIVE_STATUS = {
    Reason.MALFORMED_ID: 400,
    Reason.UNKNOWN_GENERATION: 404,
    Reason.CROSS_STREAM: 409,
    Reason.BEYOND_TAIL: 409,
}
ERROR_TABLE: dict[type[Exception], _Rule] = {
    UnknownGeneration: lambda _e: (404, "unknown_generation"),
    UnknownStream: lambda _e: (404, "unknown_stream"),
    AppendRefusedError: lambda e: (409, e.refusal.value),
    PageRefused: lambda e: (_PAGE_STATUS[e.refusal], e.refusal.value),
    LimitExceeded: lambda e: (413, _LIMIT_CODE[e.limit]),
    InvalidRequest: lambda _e: (422, "validation_error"),
    AmbiguousStream: lambda _e: (409, "ambiguous_stream"),
    Unauthenticated: lambda _e: (401, "unauthorized"),
    Forbidden: lambda _e: (403, "forbidden"),
    UnsupportedMediaType: lambda _e: (415, "unsupported_media_type"),
    NotAcceptable: lambda _e: (406, "not_acceptable"),
    LiveRefused: lambda e: (_LIVE_STATUS[e.reason], e.reason.value),
    TooManyReaders: lambda _e: (503, "too_many_readers"),
    HostNotAllowed: lambda _e: (421, "host_not_allowed"),
    OriginNotAllowed: lambda _e: (403, "origin_not_allowed"),
    BodyTooLarge: lambda _e: (413, "body_too_large"),
    BodyTimeout: lambda _e: (408, "body_timeout"),
    Overloaded: lambda _e: (503, "overloaded"),
    InvalidJson: lambda _e: (422, "invalid_json"),
    InvalidText: lambda _e: (422, "validation_error"),
}
_EXTRA: dict[type[Exception], dict[str, str]] = {LiveRefused: {"verdict": "invalid"}}
# A body refused part-way is not read to its end: the connection cannot be reused.
_CLOSE = {"Connection": "close"}
_HEADERS: dict[int, dict[str, str]] = {
    401: _CHALLENGE,
    413: _CLOSE,
    503: {**_RETRY, **_CLOSE},
}


class Refused(StarletteHTTPException):
    """A refusal of the table raised where only an `HTTPException` passes through.

    The front door reads a body when the route's handler asks for it; FastAPI lets only
    an `HTTPException` out of that read, so the refusal travels inside one.
    """

    def __init__(self, error: Exception) -> None:
        status, _code = _rule(error)(error)
        super().__init__(status_code=status, detail=_detail(error))
        self.error = error


def _rule(error: Exception) -> _Rule:
    for kind, rule in ERROR_TABLE.items():
        if isinstance(error, kind):
            return rule
    raise KeyError(type(error).__name__)


def refusal(error: Exception) -> ProblemResponse:
    """The problem response for a refusal of the error table (`KeyError` for any other)."""
    status, code = _rule(error)(error)
    extra = _EXTRA.get(type(error), {})
    return problem(status, code, _detail(error), headers=_HEADERS.get(status), **extra)


def internal_error() -> ProblemResponse:
    """The answer to an error nobody expected (the service log has the traceback)."""
    return problem(500, "internal_error", "an unexpected error; see the service log")


def install_problem_handlers(app: FastAPI) -> None:
    """Map every exception the API can meet to its problem response."""
    for error_type in ERROR_TABLE:
        app.add_exception_handler(error_type, _refusal)
    app.add_exception_handler(StorageUnavailable, _unavailable)
    app.add_exception_handler(StorageError, _storage_error)
    app.add_exception_handler(Refused, _refused)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)


async def _refusal(_request: Request, error: Exception) -> ProblemResponse:
    return refusal(error)


async def _refused(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, Refused)
    return refusal(error.error)


def _detail(error: Exception) -> str:
    detail = getattr(error, "detail", None)
    if isinstance(detail, str):
        return detail
    if isinstance(error, NotFound):
        what = "generation" if isinstance(error, UnknownGeneration) else "stream"
        return f"no {what} {error.args[0]!r} here"
    return str(error)


async def _unavailable(_request: Request, error: Exception) -> ProblemResponse:
    log.warning("database unavailable: %s", error)
    return problem(
        503,
        "database_unavailable",
        "the database is unavailable; nothing was stored, retry later",
        headers=_RETRY,
    )


async def _storage_error(_request: Request, error: Exception) -> ProblemResponse:
    log.error("storage error: %s", error)
    return problem(500, "storage_error", "the database failed; nothing was stored")


async def _validation(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in error.errors()
    ]
    if any(e["type"] == "json_invalid" for e in errors):
        return problem(422, "invalid_json", "the body is not valid JSON", errors=errors)
    return problem(422, "validation_error", "the request does not match the schema", errors=errors)


async def _http(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, StarletteHTTPException)
    if error.status_code == 400 and isinstance(error.__cause__, ValueError | RecursionError):
        # FastAPI turns a body json.loads cannot read at all (not UTF-8, nested past the
        # recursion limit) into a bare 400; to the client it is the same as broken JSON.
        return problem(422, "invalid_json", "the body is not valid UTF-8 JSON")
    code = _HTTP_CODES.get(error.status_code, "http_error")
    detail = error.detail if isinstance(error.detail, str) else HTTPStatus(error.status_code).phrase
    return problem(error.status_code, code, detail, headers=error.headers)


async def _unexpected(_request: Request, error: Exception) -> ProblemResponse:
    log.exception("unhandled error", exc_info=error)
    return internal_error()
