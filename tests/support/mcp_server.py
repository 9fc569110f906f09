"""An MCP server (the SDK's `MCPServer` over streamable HTTP) using `EventLogEventStore`.

Run as `python -m tests.support.mcp_server --port P --eventlog URL [--max-events N]
[--store-max-event-bytes B] [--store-max-message-bytes B] [--key K] [--store-timeout S]
[--append-transport channel|rest] [--durability pipelined|per_event] [--lease-seconds S]
[--pipeline N]` by the end-to-end tests. Its
`progress` tool streams progress notifications, may close its SSE stream mid-way (the SDK's
server-initiated disconnect), may pause on a gate, and may send a padded step or a large
result. Gates are opened by the tests with `POST /test/gates/{name}`, so every ordering a
test needs is awaited, never slept for. `GET /test/store-failures` answers the store's
failure counter, `GET /test/store-transport` how its appends travel (channel or REST,
fallbacks, resends), and `GET /test/scopes/{session_id}` a session's scope key (for a test
that writes into a session's streams from another process).

`replay_after` holds this session's replays until a gate opens: `"done"` means until the
tool's response is stored. That keeps the SDK's own window between replaying and
registering the resumed stream (`streamable_http.py`: "the replay->live-tail ordering
window here is pre-existing") out of these tests; it is the SDK's, not the store's.
"""

from __future__ import annotations

import argparse
import logging

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, StreamId
from mcp_eventlog_client.mcp import EventLogEventStore, current_scope
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.support.gates import served_gates
from tests.support.upstreams import contract

replay_gate: dict[str, str] = {}  # session scope -> the gate its replays wait for
done_gate: dict[tuple[str, str], str] = {}  # (scope, request id) -> gate opened on response


class GatedStore(EventLogEventStore):
    """The real store, with replays held until the test (or the tool's end) allows them."""

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = await super().store_event(stream_id, message)
        gate = done_gate.get((current_scope() or "", stream_id))
        if gate is not None and isinstance(message, JSONRPCResponse | JSONRPCError):
            gates[gate].set()
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        gate = replay_gate.get(current_scope() or "")
        if gate is not None:
            with anyio.fail_after(20):
                await gates[gate].wait()
        return await super().replay_events_after(last_event_id, send_callback)


server = MCPServer("eventlog-e2e")
gates = served_gates(server)


async def _wait(gate: str) -> None:
    with anyio.fail_after(20):
        await gates[gate].wait()


@server.tool()
async def progress(
    n: int,
    ctx: Context,
    close_at: int = 0,
    pause_at: int = 0,
    close_on_gate: bool = False,
    tag: str = "",
    replay_after: str = "",
    pad: int = 0,
    pad_at: int = 0,
    result_bytes: int = 0,
) -> str:
    """Report progress 1..n, then return (with `result_bytes`, a text of that size).

    After step `close_at` the SSE stream is closed. After step `pause_at` the tool waits for
    the gate `<tag>:continue`; with `close_on_gate` it first waits for `<tag>:close` and
    closes the stream then. `replay_after` holds this session's replays (see the module).
    The message of step `pad_at` carries `pad` more characters.
    """
    scope = current_scope() or ""
    if replay_after == "done":
        done_gate[(scope, ctx.request_id)] = replay_gate[scope] = f"{tag}:done"
    elif replay_after:
        replay_gate[scope] = replay_after
    for step in range(1, n + 1):
        padding = "x" * pad if step == pad_at else ""
        await ctx.report_progress(step, n, f"step {step}{padding}")
        if step == close_at:
            await ctx.close_sse_stream()
        if step == pause_at:
            if close_on_gate:
                await _wait(f"{tag}:close")
                await ctx.close_sse_stream()
            await _wait(f"{tag}:continue")
    return contract.result_text(n, result_bytes)


def result_text(size: int) -> str:
    """A large tool result: `size` characters, some of them outside ASCII (the upstreams')."""
    return contract.result_text(0, size)


@server.custom_route("/test/scopes/{session_id}", methods=["GET"])
async def scope_of(request: Request) -> Response:
    """The store's scope key of an MCP session (how its service streams are named)."""
    key = store.scopes.key_of(request.path_params["session_id"]) if store is not None else None
    return JSONResponse({"scope": key})


@server.custom_route("/test/store-transport", methods=["GET"])
async def store_transport(request: Request) -> Response:
    """How the store's appends travel: the transport chosen, the appends that fell back to
    REST (by reason), and the channel's frames resent after a drop and its reconnects."""
    if store is None:
        return JSONResponse({})
    channel = store.client.channel
    return JSONResponse(
        {
            "append_transport": store.client.append_transport,
            "fallbacks": dict(store.append_fallbacks),
            "resent": channel.resent if channel is not None else 0,
            "reconnects": channel.reconnects if channel is not None else 0,
        }
    )


@server.custom_route("/test/store-failures", methods=["GET"])
async def store_failures(request: Request) -> Response:
    """The store's failure counter (`EventLogEventStore.failures`)."""
    return JSONResponse(dict(store.failures) if store is not None else {})


store: GatedStore | None = None


def main() -> None:
    """Serve on 127.0.0.1 with the event store pointing at `--eventlog`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--eventlog", required=True)
    parser.add_argument("--max-events", type=int, default=None)
    parser.add_argument("--store-max-event-bytes", type=int, default=1024 * 1024)
    parser.add_argument("--key", default=None, help="the writer key (default: EVENTLOG_KEY)")
    parser.add_argument("--store-timeout", type=float, default=10.0)
    parser.add_argument("--store-max-message-bytes", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--append-transport", choices=("channel", "rest"), default=None)
    parser.add_argument("--durability", choices=("pipelined", "per_event"), default="pipelined")
    parser.add_argument("--lease-seconds", type=int, default=None)
    parser.add_argument("--pipeline", type=int, default=128)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    global store
    store = GatedStore(
        args.eventlog,
        args.key,
        max_events=args.max_events,
        max_event_bytes=args.store_max_event_bytes,
        store_timeout=args.store_timeout,
        max_message_bytes=args.store_max_message_bytes,
        append_transport=args.append_transport,
        durability=args.durability,
        lease_seconds=args.lease_seconds,
        pipeline=args.pipeline,
    )
    app = store.asgi_app(
        server.streamable_http_app(event_store=store, retry_interval=10, host="127.0.0.1")
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
