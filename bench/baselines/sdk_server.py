"""The official Python SDK's server (`MCPServer`, streamable HTTP) for `bench.suites.mcp_overhead`.

`python -m bench.baselines.sdk_server --port P --store none|memory|eventlog|persist [--eventlog URL]
[--append-transport channel|rest] [--durability pipelined|per_event] [--persist-db PATH]`
serves one tool, `progress(n)`, which reports progress 1..n and returns: the harness of
the SDK-store goals (one call streaming 200 progress notifications; 16 such calls at
once). `--store` picks the event store: none, the SDK example's in-memory store
(`bench.baselines.sdk_store`), `EventLogEventStore` on the service at `--eventlog` (its appends
over the channel by default, or REST; pipelined by default, or per event), or
mcp-persist's `SQLiteEventStore` on the file `--persist-db` (its defaults: a commit per
event), wired by its own `with_persistence`.
"""

from __future__ import annotations

import argparse
import logging

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventStore
from mcp_eventlog_client.mcp import EventLogEventStore
from starlette.types import ASGIApp

from bench.baselines.sdk_store import InMemoryEventStore

server = MCPServer("eventlog-bench")


@server.tool()
async def progress(n: int, ctx: Context) -> str:
    """Report progress 1..n, then return."""
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"step {step}")
    return f"counted to {n}"


def main() -> None:
    """Serve on 127.0.0.1 with the chosen store."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", choices=("none", "memory", "eventlog", "persist"), required=True)
    parser.add_argument("--eventlog", default=None)
    parser.add_argument("--append-transport", choices=("channel", "rest"), default=None)
    parser.add_argument("--durability", choices=("pipelined", "per_event"), default="pipelined")
    parser.add_argument("--persist-db", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    store: EventStore | None = None
    wrap = None
    if args.store == "persist":
        from mcp_persist import with_persistence

        persisted: ASGIApp = with_persistence(server, backend="sqlite", url=args.persist_db)
        uvicorn.run(persisted, host="127.0.0.1", port=args.port, log_level="warning")
        return
    if args.store == "memory":
        store = InMemoryEventStore(max_events_per_stream=1_000_000)
    elif args.store == "eventlog":
        eventlog = EventLogEventStore(
            args.eventlog, append_transport=args.append_transport, durability=args.durability
        )
        store, wrap = eventlog, eventlog.asgi_app
    app: ASGIApp = server.streamable_http_app(event_store=store, host="127.0.0.1")
    if wrap is not None:
        app = wrap(app)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
