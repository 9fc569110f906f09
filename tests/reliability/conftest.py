"""Fixtures of the reliability suite: the soak flag, real server processes, and a private
PostgreSQL server for the tests that stop and restart it.

Quick variants run in the normal suite; `EVENTLOG_SOAK=1` (or `make soak`) turns on the
long variants and makes the quick ones do more rounds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.private_postgres import PrivatePostgres, private_database
from tests.support.processes import ServerProcess


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    """A real `python -m app serve` process on the test's database (not started yet)."""
    process = ServerProcess(database_url, log_path=tmp_path / "server.log")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    """A migrated database on a PostgreSQL server of this test's own, to stop and restart."""
    with private_database() as server:
        yield server
