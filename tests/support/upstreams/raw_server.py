"""The command line and the loop of the hand-written upstreams (`hostile_upstream.py`,
`flood_upstream.py`): `--port`, then one asyncio stream server on 127.0.0.1 until killed."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handle: Handler, port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main(handle: Handler) -> None:
    """Serve `handle` on 127.0.0.1, on the port `--port` names."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(_serve(handle, parser.parse_args().port))
