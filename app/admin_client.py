"""A small async client for the admin API, used by `mcp-eventlog admin`.

It lives in the service, not in the client package (`clients/python`): the service never
depends on that package at run time. It returns the service's JSON as plain dicts (the CLI
prints them as tables or as they are). A refusal is an `AdminError` with the problem's
`code`; an unreachable service is an `AdminError` with status 0 and code `unreachable`.
Admin reads are never retried: an operator sees a failure at once.
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import quote

import httpx
from mcp_eventlog_client.closing import AsyncClosing

from app.error_root import EventLogError

DEFAULT_URL = "http://127.0.0.1:8080"
PREFIX = "/admin/v1"


class AdminError(EventLogError):
    """A request the service refused (`status`, problem `code`) or could not answer (0)."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail


class AdminClient(AsyncClosing):
    """The admin API over HTTP, with a bearer key (never the writer's `EVENTLOG_KEY`)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._base = url.rstrip("/") + PREFIX
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout)

    async def aclose(self) -> None:
        """Release the connection pool."""
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
        return await self._call(
            "GET", f"/streams/{path_segment(stream_id)}", params={"tenant": tenant}
        )

    async def generation(self, token: str) -> dict[str, Any]:
        """One generation."""
        return await self._call("GET", f"/generations/{path_segment(token)}")

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

    async def tasks(
        self,
        *,
        status: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """A page of unexpired tasks, newest first (`next_cursor` for the next page)."""
        params = {"status": status, "tenant": tenant, "limit": limit, "cursor": cursor}
        return await self._call("GET", "/tasks", params=params)

    async def task(self, task_id: str) -> dict[str, Any]:
        """One task with its attempts and the first events of its current attempt."""
        return await self._call("GET", f"/tasks/{path_segment(task_id)}")

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
        try:
            response = await self._http.request(
                method, self._base + path, params=query, json=json, headers=self._headers
            )
        except httpx.TransportError as error:
            raise AdminError(0, "unreachable", str(error) or type(error).__name__) from error
        if not response.is_success:
            raise _refusal(response)
        body: dict[str, Any] = response.json()
        return body


def path_segment(value: str) -> str:
    """`value` as one path segment that means itself: every reserved character escaped,
    and a segment of dots alone (`.`, `..`, which URL normalisation would remove, asking
    about another path) escaped too, so that the service sees and refuses it."""
    segment = quote(value, safe="")
    return segment.replace(".", "%2E") if segment.strip(".") == "" else segment


def _refusal(response: httpx.Response) -> AdminError:
    body: Any = None
    with contextlib.suppress(ValueError):
        body = response.json()
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        return AdminError(response.status_code, body["code"], str(body.get("detail") or ""))
    return AdminError(response.status_code, "http_error", response.text[:200])
