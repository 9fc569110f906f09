"""The MCP deployment the end-to-end tests run against
(`clients/python/tests/mcp/conftest.py` starts it): the event-log service and the test MCP
server as processes, and the calls tests make to them past the MCP client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.support import upstreams


@dataclass(frozen=True)
class Deployment:
    """A running service and an MCP server storing its streams there."""

    eventlog: str
    mcp: str


async def open_gate(deployment: Deployment, name: str) -> None:
    """Let the MCP server's tool or replays that wait on `name` go on."""
    await upstreams.open_gate(deployment.mcp, name)


async def service(deployment: Deployment, method: str, path: str, body: Any = None) -> Any:
    """Call the event-log service directly (as an operator or another writer would)."""
    async with httpx.AsyncClient(base_url=deployment.eventlog) as http:
        response = await http.request(method, path, json=body)
        response.raise_for_status()
        return response.json()
