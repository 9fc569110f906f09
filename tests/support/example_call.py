"""One call of the README's example tool (`build_report`), by the official Python MCP client."""

from __future__ import annotations

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def build_report(url: str, pages: int) -> tuple[str, list[float]]:
    """The tool's text and the progress steps the client heard, from the server at `url`."""
    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool(
            "build_report", {"pages": pages}, progress_callback=on_progress
        )
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text, steps
