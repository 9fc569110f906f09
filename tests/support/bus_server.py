"""An MCP server (the SDK's `MCPServer`, 2026-07-28 revision and earlier) whose bus is
`EventLogSubscriptionBus`.

Run as `python -m tests.support.bus_server --port P --eventlog URL [--max-events N]` by the
bus tests, two of them on one service as two replicas. Its tools publish server events
(`touch` one `ResourceUpdated`, `touch_many` several); its own listener records every
event the bus hands it, in order, and `GET /test/bus` answers that record with the bus's
counters, so a test sees each replica's delivery from the outside.
"""

from __future__ import annotations

import argparse
import logging

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent
from mcp_eventlog_client.mcp import EventLogSubscriptionBus
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

seen: list[str] = []


def record(event: ServerEvent) -> None:
    """The replica's own listener: what the bus delivered here, in order."""
    seen.append(event.uri if isinstance(event, ResourceUpdated) else type(event).__name__)


def build(bus: EventLogSubscriptionBus) -> MCPServer:
    """The server, publishing through `bus`."""
    server = MCPServer("eventlog-bus-e2e", subscriptions=bus)

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        """Tell listeners the resource at `uri` changed."""
        await ctx.notify_resource_updated(uri)
        return f"touched {uri}"

    @server.tool()
    async def touch_many(prefix: str, count: int, ctx: Context) -> str:
        """`ResourceUpdated` for `<prefix>0` … `<prefix><count-1>`, in order."""
        for index in range(count):
            await ctx.notify_resource_updated(f"{prefix}{index}")
        return f"touched {count}"

    @server.custom_route("/test/bus", methods=["GET"])
    async def bus_record(request: Request) -> Response:
        return JSONResponse(
            {
                "seen": seen,
                "published": bus.published,
                "delivered": bus.delivered,
                "failures": dict(bus.failures),
                "lagged": bus.lagged,
                "missed": bus.missed,
                "following": bus.following.is_set(),
            }
        )

    return server


def main() -> None:
    """Serve on 127.0.0.1 with the bus on the service at `--eventlog`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--eventlog", required=True)
    parser.add_argument("--max-events", type=int, default=10_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    bus = EventLogSubscriptionBus(args.eventlog, max_events=args.max_events, publish_timeout=2.0)
    bus.subscribe(record)
    server = build(bus)
    app = bus.asgi_app(server.streamable_http_app(host="127.0.0.1"))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
