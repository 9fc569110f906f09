"""What the client accepts from the service: one answer, read under a cap, checked, parsed.

The service is trusted to be the service, not to be well-behaved: `EVENTLOG_URL` may point
at a captive proxy or another program, and a broken or hostile server must not be able to
hang, exhaust or confuse the MCP server the client lives in. So every answer is

- read under `max_response_bytes` of *decoded* body (a gzip bomb is cut where its inflated
  bytes pass the cap, not where its compressed ones do);
- of the media type the route answers with (`application/json` or `…+json`; SSE for live
  reads), else `UnexpectedContentType`;
- parsed strictly: a body that is not JSON, or lacks a field of the contract, is a
  `MalformedResponse` (see `mcp_eventlog_client.models.read_answer`);
- never a redirect to follow: a 3xx is `Redirected` (the request's events would otherwise
  go wherever the `Location` says, and that host's answer would be taken as the
  service's acknowledgement).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import httpx

from mcp_eventlog_client.errors import (
    EventLogError,
    HttpError,
    MalformedResponse,
    Redirected,
    ResponseTooLarge,
    UnexpectedContentType,
    error_for,
)

JSON: Final = "application/json"
EVENT_STREAM: Final = "text/event-stream"
MiB: Final = 1024 * 1024
DEFAULT_MAX_RESPONSE_BYTES: Final = 64 * MiB
"""A resume page is at most the service's `EVENTLOG_MAX_PAGE_BYTES` (4 MiB) of data; JSON
escaping can make that up to six times as long, so 64 MiB leaves room and still bounds a
client's memory."""


async def read_capped(response: httpx.Response, cap: int) -> bytes:
    """The response's decoded body; `ResponseTooLarge` as soon as it passes `cap` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap and "content-encoding" not in response.headers:
        raise _too_large(response.status_code, cap)
    body = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > cap:
                raise _too_large(response.status_code, cap)
    except httpx.DecodingError as error:
        raise MalformedResponse(response.status_code, MalformedResponse.code, str(error)) from error
    return bytes(body)


def _too_large(status: int, cap: int) -> ResponseTooLarge:
    return ResponseTooLarge(status, ResponseTooLarge.code, f"the answer is over {cap} bytes")


def media_type(headers: httpx.Headers) -> str:
    """The answer's media type, lower case, without parameters."""
    value: str = headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


def expect_media_type(status: int, headers: httpx.Headers, expected: str) -> None:
    """`UnexpectedContentType` unless the answer is of `expected` (or `+json` for JSON)."""
    kind = media_type(headers)
    if kind == expected or (expected == JSON and kind.endswith("+json")):
        return
    detail = f"expected {expected}, got {kind or 'no Content-Type'} (is EVENTLOG_URL the service?)"
    raise UnexpectedContentType(status, UnexpectedContentType.code, detail)


@dataclass(frozen=True, slots=True)
class Answer:
    """One whole answer of the service: its status, headers and decoded body."""

    status: int
    headers: httpx.Headers
    content: bytes

    def json(self) -> Any:
        """The JSON body of a successful answer."""
        expect_media_type(self.status, self.headers, JSON)
        try:
            return json.loads(self.content)
        except ValueError as error:  # also UnicodeDecodeError
            detail = f"the body is not JSON: {error}"
            raise MalformedResponse(self.status, MalformedResponse.code, detail) from error

    def refusal(self) -> EventLogError:
        """The error a non-2xx answer stands for: its problem's, or its bare status."""
        if 300 <= self.status < 400:
            where = self.headers.get("location", "")
            return Redirected(
                self.status, Redirected.code, f"not followed: a redirect to {where!r}"
            )
        body: Any = None
        if media_type(self.headers) in (JSON, "application/problem+json"):
            try:
                body = json.loads(self.content)
            except ValueError:
                body = None
        if isinstance(body, dict) and isinstance(body.get("code"), str):
            error = error_for(self.status, body["code"], str(body.get("detail") or ""))
        else:
            text = self.content[:200].decode(errors="replace") or f"HTTP {self.status}"
            error = HttpError(self.status, HttpError.code, text)
        error.retry_after = self.retry_after()
        return error

    def retry_after(self) -> float | None:
        """Seconds the service asked to wait (`Retry-After`), when it said so in seconds."""
        value = self.headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            return None  # an HTTP date: rare from this service; fall back to the backoff
