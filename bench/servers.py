"""Starting and stopping the processes under test, and watching their memory.

Every process is started on 127.0.0.1 on a free port, waited for (`/healthz`), and always
stopped (SIGTERM, then SIGKILL after a bound) by the `ExitStack` that started it, even when
a measurement fails. PostgreSQL databases are throwaway: created per run, dropped after.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil  # type: ignore[import-untyped]

HOST = "127.0.0.1"
REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
PG_ADMIN_DSN = os.environ.get("BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def free_port() -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    """A running HTTP server process."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        """The server's process id (uvicorn with one worker serves in this process)."""
        return self.process.pid

    def rss(self) -> int:
        """Resident memory in bytes."""
        return int(psutil.Process(self.pid).memory_info().rss)


def _wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    url = f"http://{HOST}:{server.port}/healthz"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited at start; see {server.log}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(url, timeout=1) as response,
        ):
            # Alive and still ours: another process may have won the port race.
            if response.status == 200 and server.process.poll() is None:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{server.name} did not answer /healthz in {START_TIMEOUT_S}s")


def _stop(server: Server) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(STOP_TIMEOUT_S)


@contextlib.contextmanager
def started(
    name: str, argv: list[str], env: dict[str, str], logdir: Path, cwd: Path = REPO
) -> Iterator[Server]:
    """Start `argv` with `--port <free>` appended, wait until healthy, stop it on exit.

    `cwd` is where it runs: `python -m app` imports the `app` package found there first.
    """
    port = free_port()
    log = logdir / f"{name}-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 (our own interpreter and modules)
            [*argv, "--port", str(port)],
            cwd=cwd,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Server(name, port, process, log)
    try:
        _wait_healthy(server)
        yield server
    finally:
        _stop(server)


def service(
    database_url: str,
    logdir: Path,
    name: str = "service",
    *,
    tree: Path = REPO,
    env: dict[str, str] | None = None,
) -> contextlib.AbstractContextManager[Server]:
    """The real service, as an operator starts it: `python -m app serve --port P`.

    `tree`: a directory holding another `app` package (a variant to compare); `env`:
    more settings.
    """
    full = {
        "EVENTLOG_DATABASE_URL": database_url,
        "EVENTLOG_LOG_LEVEL": "warning",
        # The harness migrated the database already; two processes must not race to.
        "EVENTLOG_MIGRATE_ON_START": "false",
        **(env or {}),
    }
    return started(name, [sys.executable, "-m", "app", "serve"], full, logdir, cwd=tree)


def noop(logdir: Path) -> contextlib.AbstractContextManager[Server]:
    """The no-op endpoint, started the same way (its own process, uvicorn factory)."""
    return started("noop", [sys.executable, "-m", "bench.baselines.noop"], {}, logdir)


@dataclass
class RssSampler:
    """Samples a process's RSS in a thread; `peak` is the largest value seen."""

    pid: int
    interval_s: float = 0.01
    baseline: int = 0
    peak: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RssSampler:
        process = psutil.Process(self.pid)
        self.baseline = self.peak = int(process.memory_info().rss)

        def run() -> None:
            while not self._stop.is_set():
                with contextlib.suppress(psutil.Error):
                    self.peak = max(self.peak, int(process.memory_info().rss))
                self._stop.wait(self.interval_s)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def growth(self) -> int:
        """Peak RSS minus RSS at the start, in bytes."""
        return self.peak - self.baseline


def postgres_available() -> bool:
    """Whether the local PostgreSQL answers."""
    import asyncio

    import asyncpg  # type: ignore[import-untyped]

    async def probe() -> bool:
        try:
            conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=3)
        except (OSError, asyncpg.PostgresError):
            return False
        await conn.close()
        return True

    return asyncio.run(probe())


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Create a database for this run; yield its SQLAlchemy URL; drop it (even on failure)."""
    import asyncio

    import asyncpg

    name = f"eventlog_bench_{secrets.token_hex(4)}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(PG_ADMIN_DSN)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
        yield f"{base}/{name}"
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
