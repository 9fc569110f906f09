"""A SQLite file that cannot be written, on a real server process.

Writes were 503 with nothing lost, but `/readyz` said 200 while no write could succeed,
and the writer connection, opened while the file was unwritable, stayed read-only after
the file was writable again: 503 until a restart. Now readiness makes a write that
changes nothing, and a read-only writer connection is dropped and opened anew. SQLite's
alone (PostgreSQL has no file to lose the right to write).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from app.storage.migrate import upgrade
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.process

RECOVERS_WITHIN = 30.0


@contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """`path` cannot be opened for writing, even by root (immutable), until the block ends."""
    root = os.geteuid() == 0
    if root:
        subprocess.run(["chattr", "+i", str(path)], check=True)
    else:
        path.chmod(0o444)
    try:
        yield
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(0o644)


def _open(http: httpx.Client) -> httpx.Response:
    return http.post("/v1/streams/s/generations")


def test_readiness_says_so_and_the_writer_reopens_once_the_file_is_writable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "eventlog.db"
    url = f"sqlite+aiosqlite:///{path}"
    upgrade(url)
    server = ServerProcess(
        url, log_path=tmp_path / "server.log", env={"EVENTLOG_MIGRATE_ON_START": "false"}
    )
    try:
        with unwritable(path):
            server.start()  # the writer's first connection opens while it cannot write
            with httpx.Client(base_url=server.base_url, timeout=30) as http:
                ready = http.get("/readyz")
                assert ready.status_code == 503, ready.text
                assert ready.headers["content-type"] == "application/problem+json"
                assert ready.json()["code"] == "database_unavailable"
                assert "cannot be written" in ready.json()["detail"]
                refused = _open(http)
                assert refused.status_code == 503, refused.text
                assert refused.json()["code"] == "database_unavailable"
                assert http.get("/healthz").status_code == 200  # alive, not ready
        # Writable again: no restart. The next write opens the file anew.
        with httpx.Client(base_url=server.base_url, timeout=30) as http:
            deadline = time.monotonic() + RECOVERS_WITHIN
            while (opened := _open(http)).status_code != 201 and time.monotonic() < deadline:
                time.sleep(0.2)  # polling a process we do not control
            assert opened.status_code == 201, opened.text
            assert http.get("/readyz").status_code == 200
            page = http.get(f"/v1/generations/{opened.json()['generation']}/events")
            assert page.status_code == 200
    finally:
        server.stop()
