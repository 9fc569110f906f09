"""A 2026-07-28 requester of the tasks extension, as raw JSON-RPC over HTTP (what the
conformance suite's client sends): `_meta` client capabilities declaring the extension,
`MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx

EXTENSION = "io.modelcontextprotocol/tasks"
_ids = itertools.count(1)


def _name(method: str, params: dict[str, Any]) -> str | None:
    if method == "tools/call":
        return str(params["name"])
    if method.startswith("tasks/"):
        return str(params["taskId"])
    return None


def message(method: str, params: dict[str, Any], *, declared: bool = True) -> dict[str, Any]:
    """A request of `method` from a requester that declared the extension (or not)."""
    capabilities: dict[str, Any] = {"extensions": {EXTENSION: {}}} if declared else {}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "task-requester", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    return {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": method,
        "params": {**params, "_meta": meta},
    }


def headers(method: str, params: dict[str, Any], credential: str | None = None) -> dict[str, str]:
    """The request headers of `method` (with `Authorization: Bearer credential`)."""
    sent = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    name = _name(method, params)
    if name is not None:
        sent["mcp-name"] = name
    if credential is not None:
        sent["authorization"] = f"Bearer {credential}"
    return sent


def request(method: str, params: dict[str, Any], credential: str | None = None) -> dict[str, Any]:
    """The body and headers of a request of `method`, as httpx's keyword arguments
    (`client.post(url, **request(…))`, `client.stream("POST", url, **request(…))`)."""
    return {
        "content": json.dumps(message(method, params)),
        "headers": headers(method, params, credential),
    }


async def ask(
    client: httpx.AsyncClient,
    url: str,
    method: str,
    params: dict[str, Any],
    credential: str | None = None,
) -> dict[str, Any]:
    """POST one request; its JSON-RPC response object (`result` or `error`)."""
    answer: dict[str, Any] = (await client.post(url, **request(method, params, credential))).json()
    return answer


async def first_progress(client: httpx.AsyncClient, url: str, task_id: str) -> None:
    """Return once `tasks/stream` (on `url`) shows the task's first progress event (within
    30 s)."""
    params = {"taskId": task_id, "after": 0}
    async with (
        asyncio.timeout(30),
        client.stream("POST", url, **request("tasks/stream", params)) as response,
    ):
        async for text in response.aiter_text():
            if "notifications/progress" in text:
                return
