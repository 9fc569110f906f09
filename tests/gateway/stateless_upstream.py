"""A stateless upstream for the gateway: the official Python SDK server of
`tests.support.upstreams.python_server` (its `progress` tool, gates and test routes) run
with `stateless_http=True` — no `Mcp-Session-Id`, every request on its own.

Run as `python -m tests.gateway.stateless_upstream --port P`.
"""

from __future__ import annotations

import argparse

import uvicorn

from tests.support.upstreams.python_server import Witness, server


def main() -> None:
    """Serve on 127.0.0.1, stateless."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = server.streamable_http_app(host="127.0.0.1", stateless_http=True)
    uvicorn.run(Witness(app), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
