"""One connection to the service: base URL, key, a reused `httpx.AsyncClient`, bounded retries.

The writer client here, and an admin client later, send their requests through a
`ServiceConnection`, so every API shares one connection pool, one way to authenticate and
one rule for what may be retried.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from mcp_eventlog_client.errors import ServiceUnreachable, error_from_response

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


class ServiceConnection:
    """Sends requests to the service and turns refusals into `EventLogError`s.

    `base_url` and `key` default to the environment (`EVENTLOG_URL`, `EVENTLOG_KEY`); the
    key is sent as `Authorization: Bearer <key>`. Pass `http` to use your own
    `httpx.AsyncClient` (its `base_url` is used when no `base_url` is given); it is then
    yours to close. Otherwise one client is created here and reused for every request, so
    connections are kept alive across calls.
    """

    def __init__(
        self,
        base_url: str | None = None,
        key: str | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        given_base = str(http.base_url) if http is not None and str(http.base_url) else None
        url = base_url or given_base or os.environ.get("EVENTLOG_URL") or DEFAULT_URL
        self.base_url = url.rstrip("/")
        key = key if key is not None else os.environ.get("EVENTLOG_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.retry = retry or RetryPolicy()
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        retry: bool,
    ) -> Any:
        """Send one request and return its JSON body; raise an `EventLogError` on refusal.

        With `retry`, a transport error or a 5xx answer is retried under the policy. Only
        callers whose request is idempotent may pass `retry=True`: the request may have been
        processed even though no answer arrived.
        """
        attempts = self.retry.attempts if retry else 1
        for attempt in range(attempts):
            last = attempt + 1 >= attempts
            try:
                response = await self._http.request(
                    method, self.base_url + path, json=json, params=params, headers=self._headers
                )
            except httpx.TransportError as error:
                if last:
                    detail = str(error) or type(error).__name__
                    raise ServiceUnreachable(0, ServiceUnreachable.code, detail) from error
                await anyio.sleep(self.retry.delay(attempt))
                continue
            if response.is_success:
                return response.json()
            if response.status_code < 500 or last:
                raise error_from_response(response)
            await anyio.sleep(self.retry.delay(attempt, _retry_after(response)))
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def aclose(self) -> None:
        """Close the connection pool (only when this object created it)."""
        if self._owns_http:
            await self._http.aclose()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None  # an HTTP date: rare from this service; fall back to the backoff
