"""One connection to the service: base URL, key, one httpx transport, bounded retries.

The writer client here, and an admin client later, send their requests through a
`ServiceConnection`, so every API shares one connection pool, one way to authenticate and
one rule for what may be retried.

Every request goes through an `httpx.AsyncBaseTransport` (httpx's seam: `ASGITransport`
for an in-process service, a fault-injecting transport in tests, any transport of your
own), called directly: the client's cookies, auth flows, redirects and event hooks are
not used here and cost a third of a request's CPU. The default transport is the fastest
measured on the same no-op endpoint (`docs/clients-python.md`, "Which HTTP client"):
aiohttp's, through `httpx-aiohttp`, when it is installed (the `[mcp]` and `[aiohttp]`
extras bring it), else httpx's own.
"""

from __future__ import annotations

import json as jsonlib
import os
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from mcp_eventlog_client.answers import (
    DEFAULT_MAX_RESPONSE_BYTES,
    EVENT_STREAM,
    Answer,
    expect_media_type,
    read_capped,
)
from mcp_eventlog_client.closing import AsyncClosing
from mcp_eventlog_client.errors import DeadlineExceeded, EventLogError, ServiceUnreachable

DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often, and how patiently, a request that is safe to repeat is sent again.

    `attempts` counts every try (1 means never retry). The delay before retry `n` (0-based)
    is `base_delay * 2**n` with +-25 % jitter, capped at `max_delay`; a `Retry-After` from
    the service is honoured up to the same cap.
    """

    attempts: int = 4
    base_delay: float = 0.05
    max_delay: float = 1.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry`."""
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        backoff = self.base_delay * 2.0**retry
        # Jitter spreads out writers that failed together, so they do not retry in lockstep.
        return min(backoff * random.uniform(0.75, 1.25), self.max_delay)  # noqa: S311


def default_transport() -> httpx.AsyncBaseTransport:
    """aiohttp's wire behind httpx's seam when `httpx-aiohttp` is installed, else httpx's own."""
    try:
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        return httpx.AsyncHTTPTransport(trust_env=False)
    transport: httpx.AsyncBaseTransport = AiohttpTransport(trust_env=False)
    return transport


class ServiceConnection:
    """Sends requests to the service and turns refusals into `EventLogError`s.

    `base_url` and `key` default to the environment (`EVENTLOG_URL`, `EVENTLOG_KEY`); the
    key is sent as `Authorization: Bearer <key>`. Requests go through `transport` (default:
    `default_transport()`), created here and closed by `aclose`, and reused for every
    request, so connections are kept alive across calls; `aclose` closes it (as
    `httpx.AsyncClient` closes its transport). Pass `http` instead to send through your own
    `httpx.AsyncClient` (its `base_url` is used when no `base_url` is
    given); it is then yours to close (a client of yours that follows redirects is still
    not followed: a 3xx is `Redirected`, as it is with `transport`).

    `timeout` is one deadline for each whole attempt (the wait for a pooled connection,
    connect, send, and every read of the answer), not per read. `max_response_bytes` caps
    the decoded body of an answer and each event of a live read (see
    `mcp_eventlog_client.answers`).
    """

    def __init__(
        self,
        base_url: str | None = None,
        key: str | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        given_base = str(http.base_url) if http is not None and str(http.base_url) else None
        url = base_url or given_base or os.environ.get("EVENTLOG_URL") or DEFAULT_URL
        self.base_url = url.rstrip("/")
        key = key if key is not None else os.environ.get("EVENTLOG_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self._http = http
        self._transport = None if http is not None else (transport or default_transport())

    @property
    def headers(self) -> dict[str, str]:
        """The headers every request carries (`Authorization`, when there is a key)."""
        return dict(self._headers)

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Request:
        all_headers = {**self._headers, **(headers or {})}
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        seconds = self.timeout if timeout is None else timeout
        if self._http is not None:
            # Built by the given client, so its own headers, cookies and params apply.
            return self._http.build_request(
                method,
                self.base_url + path,
                params=params,
                headers=all_headers,
                content=body,
                timeout=seconds,
            )
        return httpx.Request(
            method,
            httpx.URL(self.base_url + path, params=params),
            headers=all_headers,
            content=body,
            extensions={"timeout": httpx.Timeout(seconds).as_dict()},
        )

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """The response, its body not read yet (a transport error raises httpx's)."""
        if self._http is not None:
            return await self._http.send(request, stream=True, follow_redirects=False)
        assert self._transport is not None
        return await self._transport.handle_async_request(request)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        retry: bool,
        attempt_timeout: float | None = None,
    ) -> Any:
        """Send one request and return its JSON body; raise an `EventLogError` otherwise.

        With `retry`, no answer (`ServiceUnreachable`, `DeadlineExceeded`) or a 5xx answer
        is retried under the policy. Only callers whose request is idempotent may pass
        `retry=True`: the request may have been processed even though no answer arrived.
        `attempt_timeout` replaces the connection's `timeout` for this request (a long
        poll waits longer). An answer that is not JSON, is over `max_response_bytes` or is
        a redirect raises its `UntrustedResponse` at once, never retried.
        """
        body = None if json is None else _encode(json)
        attempts = self.retry.attempts if retry else 1
        for attempt in range(attempts):
            last = attempt + 1 >= attempts
            request = self._request(method, path, body=body, params=params, timeout=attempt_timeout)
            try:
                answer = await self._exchange(request, attempt_timeout)
            except ServiceUnreachable:
                if last:
                    raise
                await anyio.sleep(self.retry.delay(attempt))
                continue
            if answer.status < 300:
                return answer.json()
            if answer.status < 500 or last:
                raise answer.refusal()
            await anyio.sleep(self.retry.delay(attempt, answer.retry_after()))
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def long_poll(
        self, path: str, *, params: dict[str, Any], wait: float | None = None
    ) -> Any:
        """`GET path` with `params`, retried (a read is idempotent), and its JSON body.

        With `wait` (seconds) the service holds an empty answer until something arrives or
        `wait` runs out (its `wait` parameter), so each attempt may take the connection's
        `timeout` plus `wait` before it counts as no answer.
        """
        if wait is None:
            return await self.request("GET", path, params=params, retry=True)
        return await self.request(
            "GET",
            path,
            params={**params, "wait": wait},
            retry=True,
            attempt_timeout=self.timeout + wait,
        )

    async def _exchange(self, request: httpx.Request, attempt_timeout: float | None) -> Answer:
        """One attempt: the whole answer within the deadline, its body read under the cap."""
        seconds = self.timeout if attempt_timeout is None else attempt_timeout
        try:
            # One deadline for the whole attempt: httpx's timeouts are per read, so a
            # service dripping a byte at a time would otherwise hold the call for ever.
            with anyio.fail_after(seconds):
                response = await self._send(request)
                try:
                    content = await read_capped(response, self.max_response_bytes)
                finally:
                    await response.aclose()
        except TimeoutError as error:
            detail = f"no whole answer within {seconds:g} s"
            raise DeadlineExceeded(0, DeadlineExceeded.code, detail) from error
        except httpx.TransportError as error:
            raise _unreachable(error) from error
        return Answer(response.status_code, response.headers, content)

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        headers: dict[str, str],
        params: dict[str, Any] | None = None,
        attempt_timeout: float | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """`GET path` answered with a successful `text/event-stream` response (read it in
        the block).

        Sent once, never retried here: the caller decides. A refusal raises its
        `EventLogError` (`retry_after` set from the answer's header); no answer (within
        `attempt_timeout` for the status line and headers) raises `ServiceUnreachable`;
        a redirect or another media type raises its `UntrustedResponse`.
        """
        request = self._request(
            "GET", path, params=params, headers=headers, timeout=attempt_timeout
        )
        seconds = self.timeout if attempt_timeout is None else attempt_timeout
        try:
            with anyio.fail_after(seconds):
                response = await self._send(request)
        except TimeoutError as error:
            raise DeadlineExceeded(
                0, DeadlineExceeded.code, f"no answer in {seconds:g} s"
            ) from error
        except httpx.TransportError as error:
            raise _unreachable(error) from error
        try:
            if not response.is_success:
                raise await self._refusal_of(response, seconds)
            expect_media_type(response.status_code, response.headers, EVENT_STREAM)
            yield response
        finally:
            await response.aclose()

    async def _refusal_of(self, response: httpx.Response, seconds: float) -> EventLogError:
        """The refusal a streaming request was answered with (its body read under the cap)."""
        try:
            with anyio.fail_after(seconds):
                content = await read_capped(response, self.max_response_bytes)
        except TimeoutError as error:
            raise DeadlineExceeded(
                0, DeadlineExceeded.code, "the refusal did not arrive"
            ) from error
        except httpx.TransportError as error:
            raise _unreachable(error) from error
        return Answer(response.status_code, response.headers, content).refusal()

    async def aclose(self) -> None:
        """Close the transport (not an `http` client given to it: that one is yours)."""
        if self._transport is not None:
            await self._transport.aclose()


class ServiceClient(AsyncClosing):
    """A client of one API of the service, over a `ServiceConnection`: `EventLogClient`'s and
    `TaskClient`'s base, so both take the same connection options.

    Pass `connection` to share one with another client (then `aclose` here does not close
    it), or the arguments of `ServiceConnection` (`base_url`, `key`, `http`, `transport`,
    `timeout`, `retry`) for a connection of its own.
    """

    def __init__(
        self,
        base_url: str | None = None,
        key: str | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        connection: ServiceConnection | None = None,
    ) -> None:
        self._owns_connection = connection is None
        self.connection = connection or ServiceConnection(
            base_url, key, http=http, transport=transport, timeout=timeout, retry=retry
        )

    async def aclose(self) -> None:
        """Release the connection pool (unless the connection was given)."""
        if self._owns_connection:
            await self.connection.aclose()


def _encode(document: Any) -> bytes:
    # Compact, and UTF-8 as it is: `ensure_ascii` would write each non-ASCII character as
    # up to 12 bytes of escapes, and the service counts its body limit in bytes.
    return jsonlib.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def _unreachable(error: httpx.TransportError) -> EventLogError:
    detail = str(error) or type(error).__name__
    return ServiceUnreachable(0, ServiceUnreachable.code, detail)
