"""A raw MCP caller of the gateway or the service (httpx, no SDK): a session opened by
hand, a POST's SSE answer read to its end, every JSON-RPC message of it parsed — for
upstreams that misbehave in ways the official clients would hide."""

from __future__ import annotations

import json
from typing import Any

import httpx

PROTOCOL = "2025-11-25"
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": PROTOCOL,
}


def initialize(client: str, rid: int = 0) -> dict[str, Any]:
    """An `initialize` request (id `rid`) of a client named `client`."""
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }


INIT = initialize("raw")


async def open_session(http: httpx.AsyncClient, mcp: str, *, client: str = "raw") -> str:
    """Initialize a session through `mcp` (as `client`); its id."""
    response = await http.post(mcp, json=initialize(client), headers=HEADERS)
    response.raise_for_status()
    sid = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {**HEADERS, "mcp-session-id": sid}
    (await http.post(mcp, json=initialized, headers=headers)).raise_for_status()
    return sid


def tool_call(rid: object, **arguments: Any) -> dict[str, Any]:
    """A `tools/call` of the upstream's `progress` tool."""
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": "progress", "arguments": arguments, "_meta": {"progressToken": 1}},
    }


async def post_sse(
    http: httpx.AsyncClient,
    mcp: str,
    sid: str,
    body: object,
    *,
    ids: list[str] | None = None,
    protocol: str = PROTOCOL,
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """POST `body`; the response and every message of its SSE stream, read to its end
    (the event ids seen, into `ids`)."""
    headers = {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": protocol}
    found: list[dict[str, Any]] = []
    async with http.stream("POST", mcp, json=body, headers=headers) as response:
        assert response.headers["content-type"].startswith("text/event-stream"), response
        data: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif line.startswith("id:") and ids is not None:
                ids.append(line[3:].strip())
            elif line == "" and data:
                text, data = "\n".join(data), []
                if text:
                    found.append(json.loads(text))
    return response, found
