"""A FastMCP framework server (the `fastmcp` package, pinned in constraints.txt) with no
event store, as a gateway upstream: `python -m tests.support.upstreams.fastmcp_server
--port P`.

Its `progress` tool is the upstream contract of `tests.support.upstreams`: progress 1..n,
then the text "counted to n". FastMCP 4 installs next to `mcp==2.3.0` (it brings its own
`fastmcp-slim`), so this is the framework itself, not the SDK's own `MCPServer`.
"""

from __future__ import annotations

import argparse

import anyio
import uvicorn
from fastmcp import Context, FastMCP

from tests.support.upstreams.contract import result_text

server = FastMCP("fastmcp-upstream")


@server.tool
async def progress(
    n: int, ctx: Context, delay: float = 0.0, pad: int = 0, result_bytes: int = 0
) -> str:
    """Report progress 1..n (a pause of `delay` seconds before each), then return."""
    padding = "x" * pad
    for step in range(1, n + 1):
        if delay:
            await anyio.sleep(delay)
        await ctx.report_progress(step, n, f"step {step}{padding}")
    return result_text(n, result_bytes)


def main() -> None:
    """Serve `/mcp` on 127.0.0.1 (stateful sessions, no event store)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = server.http_app(path="/mcp", stateless_http=False)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
