"""`mcp-eventlog serve | migrate`: the service's command line."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from collections.abc import Sequence

import uvicorn

from app.settings import Settings
from app.storage.migrate import upgrade

log = logging.getLogger("app.cli")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `mcp-eventlog` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    settings = Settings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    if args.command == "migrate":
        upgrade(settings.database_url)
        log.info("schema is at the newest migration")
        return 0
    return _serve(args, settings)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-eventlog", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", help="bind address (default EVENTLOG_HOST, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default EVENTLOG_PORT, 8080)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    commands.add_parser("migrate", help="bring the database schema to the newest migration")
    return parser


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    if settings.should_migrate_on_start:
        upgrade(settings.database_url)
    if not _is_loopback(host):
        log.warning("serving on %s: anyone who reaches it can write and read streams", host)
    uvicorn.run(
        "app.api.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=args.workers,
        log_level=settings.log_level,
        access_log=False,
    )
    return 0


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


if __name__ == "__main__":
    sys.exit(main())
