"""Fixtures of the reliability suite: the soak flag and real server processes.

Quick variants run in the normal suite; `EVENTLOG_SOAK=1` (or `make soak`) turns on the
long variants and makes the quick ones do more rounds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server_process import ServerProcess, soak_enabled


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip `soak`-marked tests unless the soak flag is set."""
    if soak_enabled():
        return
    skip = pytest.mark.skip(reason="long variant: set EVENTLOG_SOAK=1 (or run `make soak`)")
    for item in items:
        if item.get_closest_marker("soak") is not None:
            item.add_marker(skip)


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    """A real `python -m app serve` process on the test's database (not started yet)."""
    process = ServerProcess(database_url, log_path=tmp_path / "server.log")
    try:
        yield process
    finally:
        process.stop()
