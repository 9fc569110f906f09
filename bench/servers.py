"""Starting and stopping the processes under test, and watching their memory.

Every process is started on 127.0.0.1 on a free port, waited for (`/healthz`), and always
stopped (SIGTERM, then SIGKILL after a bound) by the `ExitStack` that started it, even when
a measurement fails. PostgreSQL databases are throwaway: created per run, dropped after.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.process_memory import RssSampler
from tests.support.processes import REPO, ServerProcess, free_port

# The processes under test are started, waited for and stopped by the tests' one
# server-process helper; their memory is sampled by the tests' `RssSampler`.
__all__ = ["REPO", "RssSampler", "ServerProcess", "free_port"]

START_TIMEOUT_S = 30.0
PG_ADMIN_DSN = os.environ.get("BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextlib.contextmanager
def started(
    name: str, argv: list[str], env: dict[str, str], logdir: Path, cwd: Path = REPO
) -> Iterator[ServerProcess]:
    """Start `argv` with `--port <free>` appended, wait until `/healthz` answers 200, stop it
    on exit (SIGTERM, then SIGKILL after 10 s).

    `cwd` is where it runs: `python -m app` imports the `app` package found there first.
    """
    port = free_port()
    server = ServerProcess.program(
        [*argv[1:], "--port", str(port)], port=port, log_path=logdir / f"{name}-{port}.log", env=env
    )
    server.executable, server.cwd = argv[0], cwd
    server.ready_path, server.ready_status = "/healthz", 200
    server.start_timeout = START_TIMEOUT_S
    with server:
        yield server


def service(
    database_url: str,
    logdir: Path,
    name: str = "service",
    *,
    tree: Path = REPO,
    env: dict[str, str] | None = None,
) -> contextlib.AbstractContextManager[ServerProcess]:
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


def noop(logdir: Path) -> contextlib.AbstractContextManager[ServerProcess]:
    """The no-op endpoint, started the same way (its own process, uvicorn factory)."""
    return started("noop", [sys.executable, "-m", "bench.baselines.noop"], {}, logdir)


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
