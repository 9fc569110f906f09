"""A small async client for the admin API, used by `mcp-eventlog admin`.

It returns the service's JSON as plain dicts (the CLI prints them as tables or as they
are). It speaks through the writer client's `ServiceConnection`, so a refusal is the same
`EventLogError` (with the problem's `code`), and an unreachable service is
`ServiceUnreachable` (status 0).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx

from app.client.connection import ServiceConnection

DEFAULT_URL = "http://127.0.0.1:8080"
PREFIX = "/admin/v1"


class AdminClient:
    """The admin API over HTTP, with a bearer key."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        # `key=""` when none is given: an admin call must never borrow the writer's
        # EVENTLOG_KEY, which the connection would otherwise read from the environment.
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout)
        self._connection = ServiceConnection(url, key or "", http=self._http)

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._http.aclose()

    async def streams(
        self,
        *,
        prefix: str = "",
        tenant: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """A page of streams (`next_cursor` for the next page)."""
        params = {"prefix": prefix, "tenant": tenant, "limit": limit, "cursor": cursor}
        return await self._call("GET", "/streams", params=params)

    async def stream(self, stream_id: str, *, tenant: str | None = None) -> dict[str, Any]:
        """A stream with all its generations."""
        return await self._call("GET", f"/streams/{stream_id}", params={"tenant": tenant})

    async def generation(self, token: str) -> dict[str, Any]:
        """One generation."""
        return await self._call("GET", f"/generations/{token}")

    async def explain(
        self, last_event_id: str, *, stream_id: str | None = None, tenant: str | None = None
    ) -> dict[str, Any]:
        """The resume decision as a dry run, with every check."""
        body = {"last_event_id": last_event_id, "stream_id": stream_id, "tenant": tenant}
        return await self._call("POST", "/explain", json={k: v for k, v in body.items() if v})

    async def decisions(
        self,
        *,
        stream_id: str | None = None,
        verdict: str | None = None,
        reason: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
    ) -> dict[str, Any]:
        """Recent resume decisions, newest first."""
        params = {
            "stream_id": stream_id,
            "verdict": verdict,
            "reason": reason,
            "tenant": tenant,
            "limit": limit,
        }
        return await self._call("GET", "/decisions", params=params)

    async def stats(self) -> dict[str, Any]:
        """Counts across the log and verdicts by reason."""
        return await self._call("GET", "/stats")

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        # Admin reads are not retried: an operator sees the failure at once.
        body: dict[str, Any] = await self._connection.request(
            method, PREFIX + path, params=query, json=json, retry=False
        )
        return body
