"""A throwaway PostgreSQL server of our own, so a test may stop and restart it.

Restarting the machine's shared PostgreSQL would break every other test run using it at
the time; this one lives in a temporary directory, on its own port, and is gone afterwards.
Its programs come from `EVENTLOG_TEST_POSTGRES_BIN` (default: Debian's PostgreSQL 15).
`private_database()` is the one way the tests get one: migrated, removed at the end, and
where none can run, a skip (a failure under CI=true).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg

from app.storage.migrate import upgrade
from tests.support.databases import postgres_required
from tests.support.needs import missing
from tests.support.processes import free_port

BIN = Path(os.environ.get("EVENTLOG_TEST_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))


def available() -> str | None:
    """None when a private server can be made here; otherwise why not."""
    if not (BIN / "initdb").exists():
        return f"no {BIN}/initdb (set EVENTLOG_TEST_POSTGRES_BIN to PostgreSQL's bin directory)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser"
    return None


class PrivatePostgres:
    """initdb + pg_ctl in a temporary directory; `stop()`/`start()` as often as needed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.url = f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/eventlog"

    def _run(self, *args: str) -> None:
        command = [str(BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stderr.decode(errors='replace')}")

    def create(self) -> None:
        """Make the cluster, start it, create the `eventlog` database."""
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        asyncio.run(self._create_database())

    async def _create_database(self) -> None:
        conn = await asyncpg.connect(host="127.0.0.1", port=self.port, user="postgres")
        try:
            await conn.execute("CREATE DATABASE eventlog")
        finally:
            await conn.close()

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=on"
        log = str(self.root / "postgres.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`fast`: clean; `immediate`: like a crash, recovery on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def stop_without_waiting(self, mode: str) -> None:
        """Ask the server to stop and return at once (`smart` waits for open sessions)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-W", "stop")

    def wait_stopped(self, timeout: float = 30.0) -> None:
        """Wait until the postmaster is gone."""
        deadline = time.monotonic() + timeout
        while (self.data / "postmaster.pid").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not stop")
            time.sleep(0.05)

    def destroy(self) -> None:
        """Stop it if running and remove every file."""
        with contextlib.suppress(RuntimeError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def private_database() -> Iterator[PrivatePostgres]:
    """A migrated `eventlog` database on a private server, for the block; gone afterwards."""
    problem = available()
    if problem is not None:
        missing("a private PostgreSQL server", problem, required=postgres_required())
    # Not under pytest's tmp_path: the `postgres` user must reach it, and those are private.
    server = PrivatePostgres(Path(tempfile.mkdtemp(prefix="eventlog-pg-")))
    try:
        server.create()
        upgrade(server.url)
        yield server
    finally:
        server.destroy()
