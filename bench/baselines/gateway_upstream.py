"""The bench's MCP server for the gateway comparison: the official Python SDK's `MCPServer`
over Streamable HTTP, `python -m bench.baselines.gateway_upstream --port P [--eventlog URL]`.

Its `progress` tool sends n progress notifications (each about `pad` + 100 bytes of JSON,
`delay` seconds apart: 0 by default), then a result. With no `--eventlog` it has no event
store (what the gateway and mcp-persist's PersistenceProxy stand in front of); with
`--eventlog` the same server uses
our HTTP `EventLogEventStore` against the service at that URL. `GET /healthz` answers 200.
"""

from __future__ import annotations

import argparse

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

server = MCPServer("bench-gateway-upstream")


@server.tool()
async def progress(n: int, ctx: Context, pad: int = 0, delay: float = 0.0) -> str:
    """Report progress 1..n, each message padded by `pad` characters and sent `delay`
    seconds after the one before, then return."""
    padding = "x" * pad
    for step in range(1, n + 1):
        if delay and step > 1:
            await anyio.sleep(delay)
        await ctx.report_progress(step, n, f"step {step} {padding}")
    return f"counted to {n}"


@server.custom_route("/healthz", methods=["GET"])
async def healthz(_request: Request) -> Response:
    """Alive."""
    return PlainTextResponse("ok")


def main() -> None:
    """Serve on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--eventlog", default=None)
    args = parser.parse_args()
    if args.eventlog is None:
        app = server.streamable_http_app(host="127.0.0.1")
    else:
        from mcp_eventlog_client.mcp import EventLogEventStore

        store = EventLogEventStore(args.eventlog, None)
        app = store.asgi_app(server.streamable_http_app(event_store=store, host="127.0.0.1"))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
