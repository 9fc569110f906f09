"""Every error leaves as `application/problem+json` (RFC 9457) with a stable `code`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.schemas import Problem
from app.domain.append import Refusal
from app.service.errors import ServiceRefusal
from app.storage.errors import AppendRefusedError, NotFound, StorageError, StorageUnavailable

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


def install_problem_handlers(app: FastAPI) -> None:
    """Map every exception the API can meet to its problem response."""
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(AppendRefusedError, _append_refused)
    app.add_exception_handler(ServiceRefusal, _service_refusal)
    app.add_exception_handler(StorageUnavailable, _unavailable)
    app.add_exception_handler(StorageError, _storage_error)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)


async def _not_found(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, NotFound)
    what = error.code.removeprefix("unknown_")
    return problem(404, error.code, f"no {what} {error.args[0]!r} here")


_APPEND_STATUS = dict.fromkeys(Refusal, 409)


async def _append_refused(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, AppendRefusedError)
    return problem(_APPEND_STATUS[error.refusal], error.refusal.value, error.detail)


async def _service_refusal(_request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, ServiceRefusal)
    return problem(error.status, error.code, error.detail)


async def _unavailable(_request: Request, error: Exception) -> ProblemResponse:
    log.warning("database unavailable: %s", error)
    return problem(
        503,
        "database_unavailable",
        "the database is unavailable; nothing was stored, retry later",
        headers={"Retry-After": "1"},
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
    return problem(500, "internal_error", "an unexpected error; see the service log")
