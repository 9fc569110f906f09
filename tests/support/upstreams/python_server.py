"""An upstream for the gateway: the official Python SDK's server, with NO event store.

Run as `python -m tests.support.upstreams.python_server --port P [--json-response]
[--gzip]` (`--gzip`: behind Starlette's `GZipMiddleware`, every response it compresses). It is a
legacy Streamable HTTP server (sessions, SSE responses) that knows nothing of the event
log. Its `progress` tool reports progress 1..n (each step after `delay` seconds, or
waiting at step `pause_at` for the gate `<tag>:continue`), then returns `counted to n`
(or a text of `result_bytes` characters). Gates are opened with `POST /test/gates/{name}`,
so every ordering a test needs is awaited, never slept for; `GET /test/seen` answers the
headers the last requests arrived with (what the gateway forwarded; `proxy`: the values of
their `Forwarded`/`X-Forwarded-*`/`X-Real-IP` headers), `GET /test/steps/{tag}`
how many steps of a call have been sent.
"""

from __future__ import annotations

import argparse
import logging
from collections import defaultdict

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.support.gates import served_gates
from tests.support.upstreams.contract import result_text

steps: defaultdict[str, int] = defaultdict(int)
seen: dict[str, list[list[str]]] = {"headers": [], "proxy": []}
PROXY_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host")
PROXY_HEADERS += (b"x-real-ip",)

server = MCPServer("gateway-upstream")
gates = served_gates(server)


@server.tool()
async def progress(
    n: int,
    ctx: Context,
    delay: float = 0.0,
    pause_at: int = 0,
    pause_again_at: int = 0,
    tag: str = "",
    pad: int = 0,
    result_bytes: int = 0,
) -> str:
    """Report progress 1..n (each message padded by `pad` characters), then return."""
    for step in range(1, n + 1):
        if delay:
            await anyio.sleep(delay)
        await ctx.report_progress(step, n, f"step {step}" + "x" * pad)
        steps[tag] = step
        if step == pause_at:
            with anyio.fail_after(60):
                await gates[f"{tag}:continue"].wait()
        if step == pause_again_at:
            with anyio.fail_after(60):
                await gates[f"{tag}:again"].wait()
    return result_text(n, result_bytes)


@server.custom_route("/test/steps/{tag}", methods=["GET"])
async def steps_of(request: Request) -> Response:
    """How many progress steps the call tagged `tag` has sent."""
    return JSONResponse({"steps": steps[request.path_params["tag"]]})


@server.custom_route("/test/seen", methods=["GET"])
async def seen_headers(request: Request) -> Response:
    """The headers of the MCP requests received, oldest first."""
    return JSONResponse(seen)


class Witness:
    """Keeps the headers of each MCP request (what the gateway forwarded)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/mcp":
            seen["headers"].append([k.decode("latin-1") for k, _ in scope["headers"]])
            del seen["headers"][:-50]
            proxy = [
                f"{k.decode()}: {v.decode()}" for k, v in scope["headers"] if k in PROXY_HEADERS
            ]
            seen["proxy"].append(proxy)
            del seen["proxy"][:-50]
        await self.app(scope, receive, send)


def main() -> None:
    """Serve on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = server.streamable_http_app(host="127.0.0.1", json_response=args.json_response)
    served: ASGIApp = GZipMiddleware(app, minimum_size=1) if args.gzip else app
    uvicorn.run(Witness(served), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
