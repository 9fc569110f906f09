"""What the gateway stores for a JSON-RPC message, and the errors it makes itself.

Storage is the stores' convention (docs/stream-names.md, "Messages";
`mcp_eventlog_client.convention`, the Python store's own implementation): a priming event
is one empty event of type `priming`; a message is one event of type `message`, or, over
`max_event_bytes`, `n` events `message-part <i>/<n>` cut between characters — all of one
message in one append. A replay skips priming events and joins parts (`Reassembly`).

The errors: `-32010` (a refused resume, the stores' refusal: `data: {verdict, reason,
detail, discard_client_state}`; no `id` member when the request is unknown) and `-32011`
(the upstream was lost before it answered: `data.reason: "upstream_lost"`).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any, Final

from mcp_eventlog_client.convention import PRIMING_EVENT, refusal_error, stored_events

from app.domain.append import EventBody

UPSTREAM_LOST: Final = -32011


def bodies_of(data: str, max_event_bytes: int) -> list[EventBody]:
    """The events that store one message's JSON (one append)."""
    return [EventBody(data=d, event=e) for e, d in stored_events(data, max_event_bytes)]


def priming_body() -> EventBody:
    """The stored form of a priming event."""
    return EventBody(data="", event=PRIMING_EVENT)


@dataclass(frozen=True, slots=True)
class Message:
    """What the gateway needs of one JSON-RPC message: its id and whether it answers."""

    id: object
    is_response: bool


def inspect(data: str) -> Message | None:
    """The JSON-RPC message in `data` (None: not a JSON-RPC object)."""
    value = _json_object(data)
    if value is None:
        return None
    is_response = "method" not in value and ("result" in value or "error" in value)
    return Message(value.get("id"), is_response)


def _json_object(text: str | bytes) -> dict[str, Any] | None:
    """The JSON object `text` holds (None: not JSON, or not an object)."""
    with contextlib.suppress(ValueError):
        value = json.loads(text)
        if isinstance(value, dict):
            return value
    return None


def same_id(a: object, b: object) -> bool:
    """Whether two JSON-RPC ids are the same JSON value: `true` is not `1`, `1` is not
    `"1"` (Python's `==` says `True == 1`); a number equals a number of the same value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def requests_in(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC requests (with an id and a method) of a POST body (a batch or one)."""
    try:
        value = json.loads(body)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    return [
        item
        for item in items
        if isinstance(item, dict) and "method" in item and item.get("id") is not None
    ]


def error_response(
    request_id: object, code: int, message: str, data: dict[str, Any], *, known: bool = True
) -> str:
    """A JSON-RPC error response; `known` False leaves the `id` member out."""
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    if known:
        body["id"] = request_id
    body["error"] = {"code": code, "message": message, "data": data}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def refusal(request_id: object, verdict: str, reason: str, detail: str, *, known: bool) -> str:
    """The stores' refusal of a resume (`-32010`), which tells the client whether to
    discard what it holds."""
    error = refusal_error(verdict, reason, detail)
    data = {**error["data"], "discard_client_state": verdict == "reset"}
    return error_response(request_id, error["code"], error["message"], data, known=known)


def recording_abandoned(request_id: object, detail: str) -> str:
    """The error of a request whose recording stopped with its replica (the generation's
    writer lease ran out): the answer will never come, the client should re-issue."""
    data = {"reason": "abandoned", "detail": detail}
    return error_response(
        request_id, UPSTREAM_LOST, "the gateway replica recording the response was lost", data
    )


def upstream_lost(request_id: object, detail: str) -> str:
    """The terminal error of a request whose upstream went away before answering."""
    data = {"reason": "upstream_lost", "detail": detail}
    return error_response(request_id, UPSTREAM_LOST, "the upstream MCP server was lost", data)
