"""`async with` for the clients: leaving the block closes what the client holds."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncClosing:
    """A client used as `async with Client(...) as client:` is closed (`aclose()`) when the
    block ends, however it ends."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release what the client holds (its connection pool, its channels)."""
        raise NotImplementedError
