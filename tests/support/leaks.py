"""Name the test that opened an asyncpg connection nobody closed (a pytest plugin).

An unclosed connection is found only when the garbage collector frees it, which may be
many tests later, in a test that has nothing to do with it: asyncpg's `ResourceWarning`
then fails that test (`filterwarnings = error`) and, outside asyncio's slow debug mode,
says nothing of where the connection came from. With this plugin each connection keeps
the id of the test that was running when it was opened as its "source traceback", so the
warning names it. No outcome changes: the same warning fails the same test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asyncpg.connection import Connection

_running = "no test (collection or session set-up)"
_original_init = Connection.__init__


def _init(self: Connection, *args: Any, **kwargs: Any) -> None:
    _original_init(self, *args, **kwargs)
    if not self._source_traceback:  # asyncio debug mode's own traceback says more
        self._source_traceback = f"during {_running}"


Connection.__init__ = _init  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    global _running
    _running = item.nodeid
    try:
        return (yield)
    finally:
        _running = f"the time after {item.nodeid}"
