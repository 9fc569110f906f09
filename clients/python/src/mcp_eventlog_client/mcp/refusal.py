"""What a client is sent when its resume is refused: a JSON-RPC error for its request.

The SDK cannot tell a client to discard its state, and both official clients wait forever
on a resumption that sends nothing, so a refused resume fails the request visibly (to be
re-issued): an error `RESUME_REFUSED` (-32010) whose `data` carries the verdict and reason.

Its `id` is the request's: the SDK names a request's stream by `str(request id)`, so the
stream a token belongs to gives it back. A decimal id is sent as a number (the official
clients number their requests, and the TypeScript ones match responses by `Number(id)`),
any other as the string it is. Where the store cannot know the request (a token the
service never issued, an id that is not one), the error has **no `id` member**: the MCP
schema's `JSONRPCErrorResponse` has `id?: RequestId` (never `null`), and the TypeScript
v2 client (2.4.0), which gives any response on an explicit resumption the id of the
request it resumes, then fails that request with this error; `"id": null` it drops as
invalid, reconnects and waits until its timeout. What each official client shows is in
`docs/clients-python.md` ("What each official client does with a refusal").
"""

from __future__ import annotations

import secrets
from typing import Final

from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventMessage, StreamId
from mcp_types import ErrorData, JSONRPCError

from mcp_eventlog_client.convention import RESUME_REFUSED as RESUME_REFUSED
from mcp_eventlog_client.convention import refusal_error, request_id_of

UNSTORED_PREFIX: Final = "unstored:"
"""The id of a message sent live without being stored starts with this (never resumed)."""

# The store's own reasons (beside the service's verdict reasons), shared with the
# TypeScript store: `docs/stream-names.md`, "Refusals".
NOT_STORED: Final = "not_stored"
CROSS_SESSION: Final = "cross_session"
MID_MESSAGE: Final = "mid_message"
NOT_A_MESSAGE: Final = "not_a_message"
UNAVAILABLE: Final = "unavailable"
TIMEOUT: Final = "timeout"


def new_placeholder() -> str:
    """A fresh id for a message that goes out unstored: `unstored:` and 128 random bits."""
    return UNSTORED_PREFIX + secrets.token_urlsafe(16)


async def refuse(
    send_callback: EventCallback,
    sdk_stream: StreamId | None,
    verdict: str,
    reason: str,
    detail: str,
) -> None:
    """Fail the request of `sdk_stream`: an unstored error event (no id to resume from).

    `sdk_stream` None: the request is unknown, and the error carries no `id` member. On
    the standalone GET stream no request waits: there is nobody to fail, and nothing is
    sent.
    """
    if sdk_stream == GET_STREAM_KEY:
        return
    error = ErrorData(**refusal_error(str(verdict), reason, detail))
    request_id = request_id_of(sdk_stream)
    if request_id is None:
        # `id` left out of the fields set: the SDK writes events with `exclude_unset`, so
        # the wire has no `id` member at all rather than `"id": null` (see the module).
        message = JSONRPCError.model_construct(
            {"jsonrpc", "error"}, jsonrpc="2.0", id=None, error=error
        )
    else:
        message = JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    await send_callback(EventMessage(message))
