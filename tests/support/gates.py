"""Gates: how a test orders events across processes. A test server's tool waits on a named
gate; the test opens it with `POST /test/gates/{name}` (`tests.support.upstreams.open_gate`)."""

from __future__ import annotations

from collections import defaultdict

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


def served_gates(server: MCPServer) -> defaultdict[str, anyio.Event]:
    """The gates of `server`, each opened by a `POST /test/gates/{name}` it now serves."""
    gates: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)

    @server.custom_route("/test/gates/{name}", methods=["POST"])
    async def open_gate(request: Request) -> Response:
        gates[request.path_params["name"]].set()
        return JSONResponse({"opened": request.path_params["name"]})

    return gates
