"""`mcp-eventlog serve | gateway | migrate | gc | admin …`: the service's command line."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import dataclasses
import ipaddress
import json
import logging
import math
import os
import sys
from collections.abc import Sequence

import uvicorn
from pydantic import ValidationError
from pydantic_settings import SettingsError

from app import __version__, bootstrap
from app.admin_cli import add_admin_parser, run_admin
from app.admin_client import AdminClient
from app.domain.outcomes import RetentionPass
from app.errors import StorageError
from app.gateway.task_spec import TaskSpec
from app.logs import configure_logging, logging_config
from app.settings import Settings
from app.storage.database import dialect_for, location_problem
from app.storage.errors import translated_errors
from app.storage.migrate import upgrade

log = logging.getLogger("app.cli")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `mcp-eventlog` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        # Only `serve` uses the keys: `migrate`, `gc` and `admin` work whatever they hold.
        settings = Settings() if args.command in ("serve", "gateway") else Settings(keys=())
    except (ValidationError, SettingsError) as error:
        for line in configuration_errors(error):
            print(f"mcp-eventlog: configuration error: {line}", file=sys.stderr)
        return 2
    configure_logging(settings)
    if args.command == "admin":
        # The CLI prints its own results; httpx's line per request would only be noise.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        return asyncio.run(_admin(args))
    if args.command == "gc":
        if not _database_ready(settings, migrate=False):
            return 2
        report = asyncio.run(_collect_garbage(settings))
        print(json.dumps(dataclasses.asdict(report)))
        return 0
    if args.command == "migrate":
        if not _database_ready(settings, migrate=True):
            return 2
        log.info("schema is at the newest migration")
        return 0
    if args.command == "gateway":
        return _gateway(args, settings)
    return _serve(args, settings)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-eventlog", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", help="bind address (default EVENTLOG_HOST, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default EVENTLOG_PORT, 8080)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    _add_gateway_parser(commands)
    commands.add_parser("migrate", help="bring the database schema to the newest migration")
    commands.add_parser("gc", help="run one retention pass now (expire, purge, trim) and exit")
    add_admin_parser(commands)
    return parser


def _add_gateway_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gateway = commands.add_parser(
        "gateway", help="serve the service plus an MCP endpoint recording an upstream server"
    )
    gateway.add_argument(
        "--upstream", help="the upstream MCP endpoint URL (default EVENTLOG_GATEWAY_UPSTREAM)"
    )
    gateway.add_argument("--path", help="the MCP endpoint's path (default /mcp)")
    gateway.add_argument(
        "--tasks",
        metavar="SPEC",
        help="tools run as durable tasks: name[=optional|=required][+input-first],… or * "
        "(default EVENTLOG_GATEWAY_TASKS; docs/tasks.md)",
    )
    gateway.add_argument("--host", help="bind address (default EVENTLOG_HOST, 127.0.0.1)")
    gateway.add_argument("--port", type=int, help="port (default EVENTLOG_PORT, 8080)")
    gateway.set_defaults(workers=1)


def _gateway(args: argparse.Namespace, settings: Settings) -> int:
    """`serve`, with the MCP endpoint: the flags become the settings the factory reads."""
    if args.upstream:
        os.environ["EVENTLOG_GATEWAY_UPSTREAM"] = args.upstream
    if args.path:
        os.environ["EVENTLOG_GATEWAY_PATH"] = args.path
    if args.tasks:
        os.environ["EVENTLOG_GATEWAY_TASKS"] = args.tasks
    # A gateway's request stream is terminal once its response is stored; a client that
    # missed the end resumes into it, so the gateway replays terminal generations unless
    # told otherwise (docs/gateway.md).
    os.environ.setdefault("EVENTLOG_TERMINAL_RESUME", "replay")
    try:
        settings = Settings()
    except (ValidationError, SettingsError) as error:
        for line in configuration_errors(error):
            print(f"mcp-eventlog: configuration error: {line}", file=sys.stderr)
        return 2
    if not settings.gateway_upstream:
        print(
            "mcp-eventlog: gateway needs --upstream URL (or EVENTLOG_GATEWAY_UPSTREAM)",
            file=sys.stderr,
        )
        return 2
    if settings.gateway_tasks:
        try:
            TaskSpec.parse(settings.gateway_tasks)
        except ValueError as error:
            print(f"mcp-eventlog: configuration error: --tasks: {error}", file=sys.stderr)
            return 2
    return _serve(
        args,
        settings,
        factory="app.gateway.app:create_gateway_app",
        # The gateway ends every relay by the grace itself (the calls still in flight are
        # then marked upstream_lost and their clients told, docs/gateway.md); uvicorn's own
        # cut of the connections is a backstop a little later, so it never comes first.
        graceful=settings.gateway_shutdown_grace_seconds + 2,
    )


async def _collect_garbage(settings: Settings) -> RetentionPass:
    """One retention pass on `settings.database_url`, with no background task running."""
    container = bootstrap.build(settings)
    try:
        return await container.retention.run_once()
    finally:
        await container.close()


async def _admin(args: argparse.Namespace) -> int:
    async with AdminClient(args.url, args.key) as client:
        return await run_admin(args, client)


def _serve(
    args: argparse.Namespace,
    settings: Settings,
    factory: str = "app.api.app:create_app",
    graceful: float | None = None,
) -> int:
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    if not settings.keys and not _is_loopback(host):
        log.error(
            "refusing to serve on %s: no keys are configured (EVENTLOG_KEYS), so anyone who "
            "reaches it could write and read every stream; set keys or bind to 127.0.0.1",
            host,
        )
        return 2
    return_freed_memory()
    migrate = settings.migrate_on_start
    if migrate is None:
        migrate = dialect_for(settings.database_url).migrates_on_start
    if not _database_ready(settings, migrate=migrate):
        return 2
    run_server(
        factory, host=host, port=port, workers=args.workers, settings=settings, graceful=graceful
    )
    return 0


def _database_ready(settings: Settings, *, migrate: bool) -> bool:
    """Whether the database can be used (and, when `migrate`, is migrated); if not, one
    line on stderr says why and what to do, instead of a driver's traceback."""
    problem = location_problem(settings.database_url)
    if problem is None and migrate:
        try:
            with translated_errors():
                upgrade(settings.database_url)
        except StorageError as error:
            problem = (
                f"the database cannot be migrated: {error.detail} (check EVENTLOG_DATABASE_URL, "
                "and that the database is up and this user may write it)"
            )
    if problem is not None:
        print(f"mcp-eventlog: {problem}", file=sys.stderr)
    return problem is None


# uvicorn's httptools protocol with bounded request heads, a head timeout and a connection
# cap, named as the app factory is: the CLI imports nothing of the API.
HTTP_PROTOCOL = "app.api.frontdoor.connections:GuardedHttpToolsProtocol"


def run_server(
    factory: str,
    *,
    host: str,
    port: int,
    workers: int,
    settings: Settings,
    graceful: float | None = None,
) -> None:
    """Serve the app `factory` (an import string) with uvicorn: every command that serves
    HTTP (`serve`, `gateway`) starts it here, so that all get the same connection limits.
    `graceful`: how long shutdown waits for open connections (default
    `EVENTLOG_SHUTDOWN_TIMEOUT_SECONDS`)."""
    uvicorn.run(
        factory,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http=HTTP_PROTOCOL,
        timeout_keep_alive=settings.keep_alive_seconds,
        log_level=settings.log_level,
        log_config=logging_config(settings),
        access_log=False,
        # The peer address and scheme stay the connection's: uvicorn would otherwise take
        # them from a loopback caller's X-Forwarded-*; the gateway decides itself which
        # proxies it believes (EVENTLOG_GATEWAY_TRUSTED_PROXIES), and nothing else reads them.
        proxy_headers=False,
        # The append channel (`GET /v1/append`): a frame is bounded as a body is, and sent
        # as it is (compression would cost every frame CPU and open a decompression bomb).
        ws_max_size=settings.max_body_bytes,
        ws_per_message_deflate=False,
        # Live readers are drained at the signal (app/api/frontdoor/draining.py): what is left to
        # wait for is requests in flight, appends among them.
        timeout_graceful_shutdown=math.ceil(
            settings.shutdown_timeout_seconds if graceful is None else graceful
        ),
    )


# glibc's malloc serves a large block from the heap once a block of that size has been
# freed (its mmap threshold rises up to 32 MiB), and a heap rarely shrinks: after a burst
# of large request bodies, hundreds of MB stay with the process. Holding the threshold at
# its default keeps every block over 128 KiB (a body, an event's data) in its own mapping,
# returned to the system when freed. The price: a page fault per 4 KiB of such a block.
MMAP_THRESHOLD_BYTES = 128 * 1024
_M_MMAP_THRESHOLD = -3  # from glibc's malloc.h


def return_freed_memory() -> None:
    """Make large freed blocks go back to the system (glibc; elsewhere, nothing happens).

    For this process by `mallopt`, and for uvicorn's worker processes by the environment
    variable glibc reads as a process starts.
    """
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(MMAP_THRESHOLD_BYTES))
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        log.debug("not glibc: large blocks are returned as this malloc does")


def configuration_errors(error: ValidationError | SettingsError) -> list[str]:
    """One line per problem, naming the variable (and the entry of a list): never the value.

    pydantic's own message quotes the input, which for `EVENTLOG_KEYS` is a secret.
    """
    if isinstance(error, SettingsError):
        return [str(error)]
    lines = []
    for problem in error.errors(include_input=False, include_url=False):
        name, *path = problem["loc"] or ("settings",)
        where = "EVENTLOG_" + str(name).upper() if name != "settings" else "settings"
        for part in path:
            where += f"[{part}]" if isinstance(part, int) else f".{part}"
        message = str(problem["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {message}" if problem["loc"] else message)
    return lines


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


if __name__ == "__main__":
    sys.exit(main())
