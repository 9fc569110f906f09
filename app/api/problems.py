"""Every error leaves as `application/problem+json` (RFC 9457) with a stable `code`.

The answers follow the one table of problem codes, `PROBLEM_CODES`
(`app/api/problem_table.py`): each code's status, headers and meaning. The errors of
`app/errors.py` carry a code and a detail, never a status; FastAPI's validation errors and
the framework's own HTTP errors (404, 405, …) are given codes of that table too, so that
every answer of the service is one of its rows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from types import MappingProxyType
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from app.api.problem_table import APPEND_CONFLICT_EXPIRED, ProblemCode
from app.api.problem_table import PROBLEM_CODES as PROBLEM_CODES
from app.api.schemas import Problem
from app.domain.append import AppendConflict
from app.errors import ConflictingBatch, EventLogError

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

_NONE: Mapping[str, str] = MappingProxyType({})
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


def problem_code(error: EventLogError) -> ProblemCode:
    """The row an error of the tree is answered by (`KeyError` for a code not in the table)."""
    if isinstance(error, ConflictingBatch) and error.conflict is AppendConflict.EXPIRED:
        return APPEND_CONFLICT_EXPIRED
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
