"""Drive the in-process app from synchronous code (hypothesis rules) on a dedicated loop.

The app, its database pool and the `httpx.AsyncClient` all live on one event loop that runs
in a background thread; `request()` hands a coroutine to it and waits for the answer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx

from app.settings import Settings
from tests.support.app import app_client

T = TypeVar("T")
CALL_TIMEOUT = 60.0


class AppDriver:
    """The app with its lifespan entered, reachable synchronously."""

    def __init__(self, settings: Settings) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._app = app_client(settings)
        self.http: httpx.AsyncClient = self.run(self._app.__aenter__())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the driver's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(CALL_TIMEOUT)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One HTTP request to the app."""
        return self.run(self.http.request(method, url, **kwargs))

    def close(self) -> None:
        """Leave the lifespan (closing the pool) and stop the loop."""
        try:
            self.run(self._app.__aexit__(None, None, None))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()
