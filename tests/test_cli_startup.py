"""A newcomer's start-up mistakes, through the real command line (`python -m app`).

Each mistake ends the command with one line on stderr that names the problem and the fix
(no traceback, exit 2); the spellings of a PostgreSQL URL that other tools accept
(`postgres://`, `postgresql://` without a driver) work, through asyncpg.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from app.settings import database_url_of
from tests.support.databases import drop_postgres_database, require_postgres_database
from tests.support.processes import REPO, ServerProcess, child_environment

pytestmark = pytest.mark.process

COMMAND_TIMEOUT = 60.0
PASSWORD = "s3cret-Pa55"


def run_cli(*args: str, database_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m app *args` on `database_url`: it must end by itself (a mistake is
    refused before anything is served)."""
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=cwd,
        env=child_environment({"EVENTLOG_DATABASE_URL": database_url}),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def one_clear_line(result: subprocess.CompletedProcess[str], *expected: str) -> str:
    """The command failed with exactly one line on stderr holding each of `expected`."""
    err = result.stderr
    assert result.returncode == 2, (result.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert err.count("\n") == 1, err[-2000:]
    assert err.startswith("mcp-eventlog: "), err
    for part in expected:
        assert part in err, (part, err)
    assert PASSWORD not in err  # a URL's password is never shown
    return err


@pytest.mark.parametrize("command", ["migrate", "serve"])
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            f"postgresql+psycopg://u:{PASSWORD}@127.0.0.1/db",
            ("EVENTLOG_DATABASE_URL", "'psycopg'", "postgresql://"),
        ),
        (
            f"mysql://u:{PASSWORD}@127.0.0.1/db",
            ("EVENTLOG_DATABASE_URL", "'mysql'", "SQLite or PostgreSQL", "postgresql://"),
        ),
        ("eventlog.db", ("EVENTLOG_DATABASE_URL", "not a database URL", "sqlite+aiosqlite:///")),
    ],
)
def test_a_url_the_service_cannot_use_is_one_line(
    command: str, url: str, expected: tuple[str, ...], tmp_path: Path
) -> None:
    one_clear_line(run_cli(command, database_url=url, cwd=tmp_path), *expected)


@contextmanager
def unwritable_folder(folder: Path) -> Iterator[None]:
    """`folder` cannot be written, even by root (immutable), until the block ends."""
    folder.mkdir()
    root = os.geteuid() == 0
    if root:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
    try:
        yield
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        else:
            folder.chmod(0o755)


@pytest.mark.parametrize("command", ["migrate", "serve"])
def test_a_sqlite_file_in_a_missing_folder_is_one_line_naming_it(
    command: str, tmp_path: Path
) -> None:
    path = tmp_path / "not-made" / "eventlog.db"
    result = run_cli(command, database_url=f"sqlite+aiosqlite:///{path}", cwd=tmp_path)
    one_clear_line(result, str(path), "does not exist", "EVENTLOG_DATABASE_URL")


@pytest.mark.parametrize("command", ["migrate", "serve"])
def test_a_sqlite_file_in_an_unwritable_folder_is_one_line_naming_it(
    command: str, tmp_path: Path
) -> None:
    folder = tmp_path / "read-only"
    with unwritable_folder(folder):
        relative = "read-only/eventlog.db"  # as a newcomer writes it: relative to the cwd
        result = run_cli(command, database_url=f"sqlite:///{relative}", cwd=tmp_path)
    one_clear_line(result, str(folder / "eventlog.db"), "not writable", "EVENTLOG_DATABASE_URL")


def test_a_database_that_does_not_answer_is_one_line_for_migrate(tmp_path: Path) -> None:
    with socket_nobody_listens_on() as port:
        url = f"postgresql://u:{PASSWORD}@127.0.0.1:{port}/db"
        result = run_cli("migrate", database_url=url, cwd=tmp_path)
    one_clear_line(result, "cannot be migrated", "EVENTLOG_DATABASE_URL")


@contextmanager
def socket_nobody_listens_on() -> Iterator[int]:
    """A loopback port bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        yield port


@pytest.fixture
def fresh_postgres() -> Iterator[str]:
    """An empty PostgreSQL database (not migrated), as `postgresql+asyncpg://…`."""
    url = require_postgres_database()
    try:
        yield url
    finally:
        drop_postgres_database(url)


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_postgres_urls_without_a_driver_migrate_and_serve_through_asyncpg(
    scheme: str, fresh_postgres: str, tmp_path: Path
) -> None:
    _, _, rest = fresh_postgres.partition("://")
    url = f"{scheme}://{rest}"
    migrated = run_cli("migrate", database_url=url, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    assert "Traceback" not in migrated.stderr
    server = ServerProcess(url, log_path=tmp_path / "server.log", cwd=REPO)
    with server, httpx.Client(base_url=server.base_url, timeout=30) as http:
        assert http.get("/readyz").status_code == 200
        opened = http.post("/v1/streams/newcomer/generations")
        assert opened.status_code == 201, opened.text
        token = opened.json()["generation"]
        appended = http.post(
            f"/v1/generations/{token}/events", json={"events": [{"data": "hello"}]}
        )
        assert appended.status_code in (200, 201), appended.text
        page = http.get(f"/v1/generations/{token}/events")
        assert [e["data"] for e in page.json()["events"]] == ["hello"]


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("postgres://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql://u@h:5433/db?x=1", "postgresql+asyncpg://u@h:5433/db?x=1"),
        ("PostgreSQL+AsyncPG://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("sqlite:///./eventlog.db", "sqlite+aiosqlite:///./eventlog.db"),
        ("sqlite+aiosqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
    ],
)
def test_a_url_is_given_the_driver_the_service_runs_on(given: str, meant: str) -> None:
    assert database_url_of(given) == meant
