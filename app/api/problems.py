"""Every error leaves as `application/problem+json` (RFC 9457) with a stable `code`.

`PROBLEM_CODES` is the one table that speaks HTTP: each problem code the service answers
with, its status, the headers that go with it and what it means. The errors of
`app/errors.py` carry a code and a detail, never a status; FastAPI's validation errors and
the framework's own HTTP errors (404, 405, …) are given codes of this table too, so that
every answer of the service is one of its rows. `tests/fixtures/problem-codes.json` holds
the same rows for the clients' tests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from types import MappingProxyType
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from app.api.schemas import Problem
from app.domain.append import AppendConflict
from app.errors import ConflictingBatch, EventLogError

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

_NONE: Mapping[str, str] = MappingProxyType({})
_RETRY = MappingProxyType({"Retry-After": "1"})
# A body refused part-way is not read to its end: the connection cannot be reused.
_CLOSE = MappingProxyType({"Connection": "close"})
_RETRY_AND_CLOSE = MappingProxyType({**_RETRY, **_CLOSE})
_CHALLENGE = MappingProxyType({"WWW-Authenticate": 'Bearer realm="mcp-eventlog"'})


@dataclass(frozen=True, slots=True)
class ProblemCode:
    """How one problem code is answered."""

    status: int
    meaning: str
    """One line for the reader of the table (and of the clients' fixture)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    said: str | None = None
    """The detail the client gets instead of the error's own, which is for the service log."""
    logged: int | None = None
    """The level the error is logged at: a fault of the service's, not of the request."""


PROBLEM_CODES: Mapping[str, ProblemCode] = MappingProxyType(
    {
        "abandoned": ProblemCode(
            409, "the writer's lease ran out and the generation was abandoned (fenced)"
        ),
        "ambiguous_stream": ProblemCode(
            409, "a stream id several tenants use, asked about without saying which tenant"
        ),
        "background_task_down": ProblemCode(
            503, "readiness: a background task of the process is down"
        ),
        "bad_request": ProblemCode(400, "the framework could not read the request"),
        "batch_too_large": ProblemCode(
            413, "a batch holds more events than EVENTLOG_MAX_BATCH_EVENTS", _CLOSE
        ),
        "beyond_tail": ProblemCode(
            409, "a claim or a page after a seq the generation never reached"
        ),
        "body_timeout": ProblemCode(
            408, "the body did not arrive within EVENTLOG_BODY_TIMEOUT_SECONDS"
        ),
        "body_too_large": ProblemCode(413, "the body is over EVENTLOG_MAX_BODY_BYTES", _CLOSE),
        "cross_session": ProblemCode(
            409, "the gateway: a claim of another MCP session or another credential"
        ),
        "cross_stream": ProblemCode(
            409, "a live read's claim names a generation of another stream"
        ),
        "database_unavailable": ProblemCode(
            503,
            "the database is unreachable, restarting or busy; nothing was stored",
            _RETRY,
            said="the database is unavailable; nothing was stored, retry later",
            logged=logging.WARNING,
        ),
        "event_too_large": ProblemCode(
            413, "an event's data is over EVENTLOG_MAX_EVENT_BYTES", _CLOSE
        ),
        "evicted": ProblemCode(410, "events of the requested range were evicted (never skipped)"),
        "expired": ProblemCode(410, "the generation's events were purged by its time to live"),
        "forbidden": ProblemCode(403, "the key lacks the scope the route needs"),
        "header_timeout": ProblemCode(
            408,
            "a request's head did not arrive within EVENTLOG_HEADER_TIMEOUT_SECONDS",
            _CLOSE,
        ),
        "headers_too_large": ProblemCode(
            431,
            "a request's head is over EVENTLOG_MAX_HEADER_BYTES or EVENTLOG_MAX_HEADERS lines",
            _CLOSE,
        ),
        "host_not_allowed": ProblemCode(421, "the Host is not one the service answers as"),
        "internal_error": ProblemCode(500, "an unexpected error of the service (its log has it)"),
        "invalid_json": ProblemCode(422, "the body is not strict UTF-8 JSON (or has a key twice)"),
        "malformed_id": ProblemCode(400, "a live read's claim is not <token>:<seq>"),
        "method_not_allowed": ProblemCode(405, "the route does not answer this method"),
        "not_acceptable": ProblemCode(406, "the client accepts none of the route's media types"),
        "not_found": ProblemCode(404, "no such route (or console file)"),
        "origin_not_allowed": ProblemCode(403, "a browser page of an origin not accepted"),
        "overloaded": ProblemCode(
            503, "the process holds as many request bodies as it may", _RETRY_AND_CLOSE
        ),
        "reserved_event_type": ProblemCode(
            422, "an event's type is a control event name of live reads (reset, end)"
        ),
        "schema_not_current": ProblemCode(503, "readiness: the database schema is not the newest"),
        "seq_conflict": ProblemCode(
            409, "the batch overlaps stored events with other content (or unverifiable ones)"
        ),
        "seq_gap": ProblemCode(409, "first_seq is beyond tail_seq + 1"),
        "storage_error": ProblemCode(
            500,
            "the database failed; nothing was stored",
            said="the database failed; nothing was stored",
            logged=logging.ERROR,
        ),
        "superseded": ProblemCode(409, "a newer generation of the stream fenced this one"),
        "terminal": ProblemCode(409, "the generation is finished; nothing more is appended"),
        "too_many_connections": ProblemCode(
            503, "the process holds EVENTLOG_MAX_CONNECTIONS connections", _RETRY_AND_CLOSE
        ),
        "too_many_pages": ProblemCode(
            503,
            "the process sends as many pages of events at once as it may (count or bytes)",
            _RETRY_AND_CLOSE,
        ),
        "too_many_readers": ProblemCode(
            503, "the process serves EVENTLOG_LIVE_MAX_READERS live readers", _RETRY_AND_CLOSE
        ),
        "unauthorized": ProblemCode(401, "no key, or a key the service does not know", _CHALLENGE),
        "unknown_generation": ProblemCode(404, "no generation has this token (for this tenant)"),
        "unknown_stream": ProblemCode(404, "no stream has this id (for this tenant)"),
        "unsupported_media_type": ProblemCode(
            415, "the body is not declared as JSON, or is encoded"
        ),
        "upstream_unavailable": ProblemCode(
            502, "the gateway's upstream MCP server is unreachable or failed before answering"
        ),
        "upstream_unreachable": ProblemCode(
            503, "readiness: the gateway's upstream MCP server does not answer", _RETRY
        ),
        "validation_error": ProblemCode(
            422, "the request does not match the schema, or breaks a rule of the contract"
        ),
    }
)
# One code, two answers: an append to an expired generation conflicts with its state (409,
# as every refused append does), where a read of its events finds them gone (410).
_APPEND_CONFLICT_EXPIRED = ProblemCode(409, "an append to a generation its time to live expired")
_DENIAL = "websocket.http.response"  # the ASGI extension for a WebSocket denial response
_POLICY_VIOLATION = 1008  # WebSocket close code
# The framework's own errors, by status (anything else it raised would be a defect here).
HTTP_ERROR_CODES: Mapping[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "body_too_large",
    415: "unsupported_media_type",
}


def problem_codes() -> list[tuple[str, int, str]]:
    """Every (code, status, meaning) the service answers with, sorted."""
    rows = [(code, row.status, row.meaning) for code, row in PROBLEM_CODES.items()]
    expired = _APPEND_CONFLICT_EXPIRED
    return sorted([*rows, (AppendConflict.EXPIRED.value, expired.status, expired.meaning)])


def problem_code(error: EventLogError) -> ProblemCode:
    """The row an error of the tree is answered by (`KeyError` for a code not in the table)."""
    if isinstance(error, ConflictingBatch) and error.conflict is AppendConflict.EXPIRED:
        return _APPEND_CONFLICT_EXPIRED
    return PROBLEM_CODES[error.code]


class ProblemResponse(JSONResponse):
    """A JSON response with the problem media type."""

    media_type = PROBLEM_MEDIA_TYPE


def problem(
    code: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    row: ProblemCode | None = None,
    members: Mapping[str, Any] = _NONE,
) -> ProblemResponse:
    """The problem response for `code` (its row of the table, unless `row` is given).

    `headers` go beside the row's own (and win over them); `members` are extension members
    of the body (`errors`, `verdict`).
    """
    row = row or PROBLEM_CODES[code]
    body = {
        "type": f"urn:mcp-eventlog:problem:{code}",
        "title": HTTPStatus(row.status).phrase,
        "status": row.status,
        "detail": detail,
        "code": code,
        **members,
    }
    return ProblemResponse(
        jsonable_encoder(body), status_code=row.status, headers={**row.headers, **(headers or {})}
    )


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


def answer(error: EventLogError) -> ProblemResponse:
    """The problem response for an error of the tree."""
    row = problem_code(error)
    if row.logged is not None:
        log.log(row.logged, "%s: %s", error.code, error.detail)
    return problem(error.code, row.said or error.detail, row=row, members=error.members)


async def send_problem(error: EventLogError, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer an error of the tree straight on the ASGI connection (a piece of the front door).

    A WebSocket upgrade gets the same problem as a denial response where the server can
    send one; elsewhere it is closed before it was accepted, which the server answers 403.
    """
    if scope["type"] == "websocket" and _DENIAL not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": _POLICY_VIOLATION, "reason": error.code})
        return
    await answer(error)(scope, receive, send)


def internal_error() -> ProblemResponse:
    """The answer to an error nobody expected (the service log has the traceback)."""
    return problem("internal_error", "an unexpected error; see the service log")


class ErrorCarrier(StarletteHTTPException):
    """Carries an error of the tree out of FastAPI's body read, which lets only an
    `HTTPException` through (the front door reads a body when the handler asks for it)."""

    def __init__(self, error: EventLogError) -> None:
        super().__init__(status_code=problem_code(error).status, detail=error.detail)
        self.error = error


def install_problem_handlers(app: FastAPI) -> None:
    """Map every exception the API can meet to its problem response."""
    app.add_exception_handler(EventLogError, _tree)
    app.add_exception_handler(ErrorCarrier, _carried)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)


async def _tree(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, EventLogError)
    return answer(error)


async def _carried(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, ErrorCarrier)
    return answer(error.error)


async def _validation(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in error.errors()
    ]
    if any(e["type"] == "json_invalid" for e in errors):
        return problem("invalid_json", "the body is not valid JSON", members={"errors": errors})
    return problem(
        "validation_error", "the request does not match the schema", members={"errors": errors}
    )


async def _http(request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, StarletteHTTPException)
    if error.status_code == 400 and isinstance(error.__cause__, ValueError | RecursionError):
        # FastAPI turns a body json.loads cannot read at all (not UTF-8, nested past the
        # recursion limit) into a bare 400; to the client it is the same as broken JSON.
        return problem("invalid_json", "the body is not valid UTF-8 JSON")
    code = HTTP_ERROR_CODES.get(error.status_code)
    if code is None:
        return await _unexpected(request, error)
    detail = error.detail if isinstance(error.detail, str) else HTTPStatus(error.status_code).phrase
    return problem(code, detail, headers=error.headers)


async def _unexpected(_request: Request, error: Exception) -> ProblemResponse:
    log.exception("unhandled error", exc_info=error)
    return internal_error()
